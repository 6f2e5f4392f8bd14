"""The live tier's tests (`make test-live`)."""
