# sleuth — see README.md. Every target installs what it needs first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install system bytecode demo test test-fast bench bench-online compare-adya bench-spark spark-up spark-down lint clean docs

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel
	$(BIN)/pip install -q -e '.[dev,spark]'
	$(MAKE) -s bytecode
	touch $(STAMP)

# Bytecode for the product's modules, as pip writes it for a wheel: an editable
# install writes none, and where PYTHONDONTWRITEBYTECODE is set (CI, containers)
# every command would compile its modules again (about 35 ms of each start-up).
bytecode:
	$(BIN)/python -m compileall -q sleuth checker workloads cluster nemesis reports >/dev/null

# The Debian packages the live parts use (targets, reports, docker image, nemeses, Spark's Java)
system:
	bash ci/system-packages.sh

demo: install system
	$(BIN)/python demos/demo.py

test: install system
	$(BIN)/pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=15

test-fast: install
	$(BIN)/pytest -q -n 2 --dist loadfile --no-loadscope-reorder -m "not slow and not docker and not spark and not cluster"

# sleuth's and adya's verdicts under every model, on random sim, list-append and rw-register histories (adya on PATH)
compare-adya: install
	$(BIN)/python bench/compare_adya.py

bench: install bytecode
	$(BIN)/python bench/bench_check.py
	$(BIN)/python bench/bench_linearizable.py
	$(BIN)/python bench/bench_shrink.py
	$(BIN)/python bench/bench_cluster.py
	$(BIN)/python bench/bench_spark.py
	$(BIN)/python bench/bench_spark_history.py

# sleuth check --follow (online) beside offline sleuth check: throughput and peak memory
bench-online: install
	$(BIN)/python bench/bench_online.py

bench-spark: install
	$(BIN)/python bench/bench_spark.py
	$(BIN)/python bench/bench_spark_history.py

# A standalone Spark master and worker on 127.0.0.1 (docs/spark.md); pids in $(SPARK_STATE).
# CLUSTER=docker: a master and two workers in containers, sharing only $(SPARK_SHARE)
# (default $SLEUTH_HOME and the current directory); state in $(SPARK_STATE)-docker.
SPARK_STATE ?= $(or $(SLEUTH_HOME),$(HOME)/.sleuth)/spark
SPARK_PORT  ?= 7077
CLUSTER     ?= local
SPARK_SHARE ?=
ifeq ($(CLUSTER),docker)
SPARK_ARGS = --docker --state $(SPARK_STATE)-docker $(foreach d,$(SPARK_SHARE),--share $(d))
else
SPARK_ARGS = --state $(SPARK_STATE)
endif
spark-up: install
	$(BIN)/python -m sleuth.spark.standalone up $(SPARK_ARGS) $(if $(filter docker,$(CLUSTER)),,--port $(SPARK_PORT))

spark-down: install
	$(BIN)/python -m sleuth.spark.standalone down $(SPARK_ARGS)

# ruff, then the layer contracts (pyproject.toml's [tool.importlinter], docs/architecture.md)
lint: install
	$(BIN)/ruff check .
	$(BIN)/python ci/lint_imports.py

clean:
	rm -rf $(VENV) build *.egg-info store bench/out

# The tables of docs/ written from the code (tests/test_models.py fails when one differs)
docs: install
	$(BIN)/python -m sleuth.checker.registry_doc docs/history-format.md
