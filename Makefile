# Two entry points (the README Quickstart): `make demo` and `make test`. Both create .venv on
# first use and install the package with its test extras; torch is pinned in pyproject.toml
# (an unpinned torch pulls a multi-GB CUDA build).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

.PHONY: demo test lint bench
demo: $(BIN)/.installed
	$(BIN)/aiadvisor demo

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

lint: $(BIN)/.installed
	$(BIN)/ruff check aiadvisor tests bench scripts

bench: $(BIN)/.installed
	for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done
	$(BIN)/python scripts/accuracy_table.py
