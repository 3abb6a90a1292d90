# meshplan: `make run` and `make test` set up everything they need on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench setup clean browsers slurm frameworks

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# The service on the embedded defaults: SQLite file ./meshplan.db, jobs in-process (no Redis). Prints the first
# API token on the first start. HOST/PORT override where it listens.
HOST ?= 127.0.0.1
PORT ?= 8000
run: setup
	$(BIN)/meshplan serve --host $(HOST) --port $(PORT)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy optimizer service store api workers accuracy benchmarks

# The browser tests drive Debian's headless Chromium (a test tool's own browser download does not work here).
browsers:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; }

# The scheduler-sync tests run a real Slurm controller on localhost: Debian's slurmctld, slurmd and munged
# (tests/slurm_cluster.py starts them in a temporary directory with their own configuration and ports).
slurm:
	@command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq slurm-wlm munge >/dev/null; }

# The export checks run each framework's and engine's own parser on the exports (tests/frameworks/): their pinned
# environments are built once and cached outside the checkout (tests/frameworks/install.py).
frameworks: setup
	$(BIN)/python tests/frameworks/install.py

# Two passes: the tests marked serial (worker processes on one Redis database, browsers, Slurm, wall-time bounds:
# tests/conftest.py SERIAL_PATHS) in one process, the rest on both cores (pytest-xdist).
test: lint browsers slurm frameworks
	$(BIN)/pytest -n 2 -m "not serial"
	$(BIN)/pytest -m serial

bench: setup
	$(BIN)/python benchmarks/estimate_speed.py
	$(BIN)/python benchmarks/model_accuracy.py
	$(BIN)/python benchmarks/uncertainty.py
	$(BIN)/python benchmarks/bridge_summary.py
	$(BIN)/python benchmarks/solver.py
	$(BIN)/python benchmarks/service.py

clean:
	rm -rf $(VENV) build *.egg-info
