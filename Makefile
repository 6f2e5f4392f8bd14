# The README's commands. Each creates .venv and installs requirements.txt itself, so they work on
# a fresh clone with nothing but python3 (3.11+) installed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv render check lint test test-e2e bench clean

venv: $(STAMP)

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

render: $(STAMP)
	$(PY) -m stacks render --all

check: $(STAMP)
	$(PY) -m stacks check --all

# Quality gates (configured in pyproject.toml): ruff, mypy on the program's packages, and the
# workflow files against the GitHub workflow schema that check-jsonschema ships (no network).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m mypy $(wildcard stacks components render policy bench)
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows $(wildcard .github/workflows/*.yml .github/workflows/*.yaml)

test: lint
	$(PY) -m pytest -q

# The torch end-to-end tests (two launchers running a real two-node torchrun on loopback, the
# bandwidth loop on gloo) in a separate venv, so the program's own venv stays small. PyTorch is
# large: on a machine without a local CPU wheel pip downloads the default (CUDA) build.
E2E := .venv-e2e
test-e2e: $(STAMP)
	test -x $(E2E)/bin/python || $(PYTHON) -m venv $(E2E)
	$(E2E)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt torch==2.13.0
	$(E2E)/bin/python -m pytest -q -m torch -rs

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) $(E2E) .pytest_cache .mypy_cache .ruff_cache
