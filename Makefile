# The README's commands. Each creates .venv and installs requirements.txt itself, so they work on
# a fresh clone with nothing but python3 (3.11+) installed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv render check lint test bench clean

venv: $(STAMP)

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

render: $(STAMP)
	$(PY) -m stacks render --all

# Quality gates (configured in pyproject.toml): ruff, mypy on the program's packages, and the
# workflow files against the GitHub workflow schema that check-jsonschema ships (no network).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m mypy $(wildcard stacks components render policy)
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows $(wildcard .github/workflows/*.yml .github/workflows/*.yaml)

test: lint
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
