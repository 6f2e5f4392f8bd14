// The one package of github.com/openshift/library-go that OpenShift's SCC admission imports
// (apiserver-library-go's sccmatching reads a namespace's uid-range and supplemental-groups annotations
// with uid.ParseBlock). The module proxy serves no version of library-go, so the live tier's own
// implementation stands in for it behind a `replace` in ../go.mod (docs/live.md "SCC admission").
module github.com/openshift/library-go

go 1.24.0
