"""Unit tests of the live tier's harness (live/), without a cluster or a build."""
