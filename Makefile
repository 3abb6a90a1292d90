# meshplan: `make run` and `make test` set up everything they need on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench setup clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# Until the service exists, `make run` runs the CLI on two examples: training and serving.
run: setup
	$(BIN)/meshplan estimate --model llama-3-70b --cluster dgx-h100:8 --mode training \
	  --gbs 512 --seq-len 4096 --tp 8 --pp 4 --dp 2 --vp 5 --sp --zero 1 --recompute selective
	$(BIN)/meshplan estimate --model llama-2-70b --cluster dgx-h100 --mode inference \
	  --batch 8 --prompt-len 2048 --output-len 256 --tp 8

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy optimizer api store workers benchmarks

test: lint
	$(BIN)/pytest

bench: setup
	$(BIN)/python benchmarks/estimate_speed.py
	$(BIN)/python benchmarks/accuracy.py
	$(BIN)/python benchmarks/solver.py

clean:
	rm -rf $(VENV) build *.egg-info
