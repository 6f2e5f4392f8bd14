"""Tests of what the program declares (components/): objects, lifecycle, providers and reads, outputs, queueing, networks."""
