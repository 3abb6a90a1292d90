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

run: setup
	$(BIN)/meshplan estimate --model llama-3-70b --cluster dgx-h100:2 --mode training \
	  --gbs 512 --seq-len 4096 --tp 8 --pp 2 --dp 1 --mbs 1 --schedule 1f1b --sp --zero 1 --recompute selective

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy optimizer api store workers benchmarks

test: lint
	$(BIN)/pytest

bench: setup
	$(BIN)/python benchmarks/estimate_speed.py
	$(BIN)/python benchmarks/accuracy.py

clean:
	rm -rf $(VENV) build *.egg-info
