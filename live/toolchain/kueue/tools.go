//go:build tools

// The command the live tier builds from this module (Kueue's manager), so `go mod tidy` keeps its dependencies.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
