"""Tests of the config model (config/): validation and its messages, provenance (file and line), bounds, reasons."""
