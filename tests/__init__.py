"""The program's tests (`make test`): a package, so they import their helpers as `tests.helpers` and `tests.fixtures`."""
