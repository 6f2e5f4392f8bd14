"""Tests of the preflight (policy/): each rule's findings and what must stay accepted, the placement search, the gate."""
