# sleuth — see README.md. Every target installs what it needs first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test test-fast bench lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel
	$(BIN)/pip install -q -e '.[dev,spark]'
	touch $(STAMP)

demo: install
	$(BIN)/python bench/demo.py

test: install
	$(BIN)/pytest -q -n 2 --dist loadfile

test-fast: install
	$(BIN)/pytest -q -n 2 --dist loadfile -m "not slow and not docker and not spark and not cluster"

bench: install
	$(BIN)/python bench/bench_check.py
	$(BIN)/python bench/bench_linearizable.py
	$(BIN)/python bench/bench_cluster.py

lint: install
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info store bench/out
