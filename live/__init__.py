"""The live tier (docs/live.md): the real control plane, Pulumi CLI and provider built from the Go module proxy, and
the tests that drive them (`make test-live`). Runs from the checkout; not part of the installed package."""
