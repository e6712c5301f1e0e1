# Quick start:  make demo   (the main job end to end)   |   make test   (the full test suite)
# Both create ./.venv and install catdask with what it needs first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# One Prefect home: the store's, as the `catdask` command picks when run by hand
# (<store>/.prefect, store = $CATDASK_STORE or ./catdask-store). Telemetry off unless you opt in.
export PREFECT_HOME ?= $(abspath $(or $(CATDASK_STORE),catdask-store))/.prefect
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export DO_NOT_TRACK ?= 1
export MPLBACKEND ?= Agg

.PHONY: install demo typecheck test test-fast test-stress bench reproduce clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/catdask demo

# The files and settings are pyproject.toml's [tool.mypy].
typecheck: $(STAMP)
	$(BIN)/python -m mypy

# `make test` is what CI runs; the stress tests repeat some of its tests at their issues' full
# counts (1,000 checks, 50 served runs, every benchmark script), about 40 minutes more.
test: $(STAMP)
	$(BIN)/python -m pytest -m "not stress"

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not stress"

test-stress: $(STAMP)
	$(BIN)/python -m pytest -m stress

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

reproduce: $(STAMP)
	$(BIN)/python benchmarks/reproduce_paper.py

clean:
	rm -rf $(VENV) .prefect catdask-store .pytest_cache .hypothesis .mypy_cache
