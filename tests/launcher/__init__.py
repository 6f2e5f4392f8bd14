"""Tests of what runs in the pod: the launcher (components/launcher/) and the bandwidth check's in-pod side."""
