"""Tests of loading stack modules and stack files (stacks/): the child process that contains a module, YAML configs."""
