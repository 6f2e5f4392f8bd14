"""Tests of the tools over renders and the cluster (tools/): render and its writer, diff, drift, recovery, status, adoption."""
