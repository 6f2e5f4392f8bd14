"""The configuration: the typed model of a cluster's config, where each value was written (provenance), the
project folder, and the JSON schema of the YAML form. The bottom layer: it imports no other package of the
program, and every other package reads it (docs/architecture.md).

The cluster modules in clusters/ import their vocabulary from here: `from config import Workload, NodeSet, ...`."""
