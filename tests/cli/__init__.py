"""Tests of the command line as a user meets it (cli/, `python -m stacks`): exit codes, messages, real processes."""
