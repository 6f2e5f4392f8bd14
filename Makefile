# The README's commands. Each creates .venv and installs what it needs itself, so they work on a fresh
# clone with nothing but python3 (3.11+) and make installed.
#   runtime (requirements.txt):   what `pulumi up` needs; Pulumi.yaml runs the program in .venv
#   development (requirements-dev.txt): test, lint and benchmark tools, added by the developer commands
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: venv dev render check lint fmt test test-e2e test-live bench clean

venv: $(STAMP)

# The program itself goes in editable (pyproject.toml [project]): `import stacks`, `import config` work from any folder,
# and the `stacks` console script is on .venv/bin. pip builds it with a setuptools of its own from the registry (the venv's 65 lacks `wheel`).
# The program's bytecode is compiled once here: a shell with PYTHONDONTWRITEBYTECODE set (some images set it) would
# otherwise compile every module of the program again on every command (a tenth of a second of each `render`).
PROGRAM := config stacks components policy tools cli
$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements.txt
	$(PIP) --no-deps -e .
	$(PY) -m compileall -q $(PROGRAM)
	touch $(STAMP)

dev: $(DEV_STAMP)

$(DEV_STAMP): $(STAMP) requirements-dev.txt
	$(PIP) -r requirements-dev.txt
	touch $(DEV_STAMP)

render: $(STAMP)
	$(PY) -m stacks render --all

check: $(STAMP)
	@$(PY) -m stacks check --all

# Quality gates (configured in pyproject.toml): ruff, mypy on the program's packages, the import layers
# (tests/test_layers.py: each package imports only the ones below it, no cycle; docs/architecture.md), and the
# workflow files against the GitHub workflow schema that check-jsonschema ships (no network). Each says one line when it
# passes (the commands are not echoed) and everything it found when it does not.
TYPED := config stacks components policy tools cli clusters bench live/toolchain.py live/controlplane.py live/clusters.py live/drive.py \
	live/nodes.py live/differential.py live/sriov.py live/kueue.py live/scc.py live/scc_differential.py live/procs.py live/packages.py \
	live/image.py live/realnodes.py
WORKFLOWS := $(wildcard .github/workflows/*.yml .github/workflows/*.yaml)
lint: $(DEV_STAMP)
	@$(VENV)/bin/ruff check --quiet . && echo "ruff: no findings"
	@printf "mypy: " && $(PY) -m mypy $(TYPED)
	@$(PY) -m tests.test_layers && echo "layers: each package imports only the layers below it, no cycle"
	@$(VENV)/bin/check-jsonschema --quiet --builtin-schema vendor.github-workflows $(WORKFLOWS) && echo "workflows: $(WORKFLOWS) valid"

# Rewrites the tree the way `make lint` wants it: ruff's safe fixes (import order, pyupgrade), then the formatter (after the
# fixes, which can leave code the formatter would lay out differently), then the lint again for what needs a hand.
# Formatter and linter read the same [tool.ruff] line-length (pyproject.toml), so formatting never writes a line that
# E501 rejects; a line it cannot split (a long string) is the author's to shorten.
fmt: $(DEV_STAMP)
	$(VENV)/bin/ruff check --fix --exit-zero --quiet .
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check .

# The preflight of every stack first: a researcher's config error stops here, with the stack file's words, before
# any test runs. Then lint and the tests; they fail, among other things, when rendered/ is not what the code
# renders (tests/test_rendered_is_fresh.py).
# The tests write some 16,000 small files a run (fake sysfs trees, renders), and pytest deletes an old run's when it ends:
# on a disk that is seconds of I/O, in memory (tmpfs, where the machine has one) a fraction of one.
# The torch tests (marked `torch`) are make test-e2e's, which installs torch: here they are deselected, not skipped.
# `--dist worksteal`: a worker whose queue runs out takes half of another's, so the run ends when the work does (on a
# new commit, with the docs' examples followed on copies, 125 s against 139 s for the default `load`; docs/performance.md).
# Quiet when green: a passing test prints nothing (tests/conftest.py), so the step says its summary line, and every
# failure, error and skip with its reason.
TEST_TMP := $(firstword $(wildcard /dev/shm))
test: check lint
	@$(if $(TEST_TMP),TMPDIR=$(TEST_TMP) )$(PY) -m pytest -q -rs -o console_output_style=classic -n auto --dist worksteal -m "not torch"

# The torch end-to-end tests (two launchers running a real two-node torchrun on loopback, the
# bandwidth loop on gloo) in a separate venv, so the program's own venv stays small. PyTorch is
# large: on a machine without a local CPU wheel pip downloads the default (CUDA) build.
# The live tier's real nodes take torch from this venv too (live/image.py), so it is a target of its own.
E2E := .venv-e2e
E2E_STAMP := $(E2E)/.installed
$(E2E_STAMP): $(DEV_STAMP) requirements-dev.txt
	test -x $(E2E)/bin/python || $(PYTHON) -m venv $(E2E)
	$(E2E)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt torch==2.13.0
	$(E2E)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(E2E_STAMP)

test-e2e: $(E2E_STAMP)
	$(E2E)/bin/python -m pytest -q -m torch -rs

bench: $(DEV_STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) $(E2E) .pytest_cache .mypy_cache .ruff_cache .hypothesis

# The live tier (docs/live.md): builds the real control plane, Pulumi CLI and kubernetes provider from the Go
# module proxy once (cached outside the clone, keyed by their pins), runs them on loopback, and drives real
# kubectl and pulumi against every committed stack. Needs Go; the README's two commands do not.
# Its real nodes' steps: Debian's containerd, runc and CNI plugins downloaded and unpacked into that cache
# (live.packages; nothing installed on the machine), then the image their pods run (live.image: torch from $(E2E)).
# Two test modules at a time (`-n 2 --dist loadfile`: each module whole on one worker, with its own control planes):
# the tier waits on Pulumi runs and controllers more than it computes (one module at a time used 1.25 of the two
# cores on average). Not `loadgroup`: pytest-xdist 3.8 cannot group under pytest 9 (it renames item._nodeid, which
# pytest 9 no longer reads).
test-live: $(DEV_STAMP) $(E2E_STAMP)
	$(PY) -m live.toolchain
	$(PY) -m live.packages
	$(PY) -m live.image
	$(PY) -m pytest -q -rs -p no:cacheprovider -n 2 --dist loadfile live/tests
