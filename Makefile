# Two commands do everything on a fresh machine with Python 3.11+:
#   make demo          - create .venv, install qrelkit, generate a campaign and run it as one campaign:
#                        campaign init, campaign run --oracle, campaign report (scripts/campaign-demo.sh)
#                        into demo-out/ (the campaign in demo-out/campaign, the report in demo-out/report.html)
#   make test          - create .venv, install qrelkit with the test, web and irds extras, run the test suite
# (installing ends with `qrelkit warmup`: every numba kernel compiled once, ahead of the first run)
# and:
#   make pipeline-demo - the same kind of campaign step by step with single commands (scripts/demo.sh)
#                        into demo-pipeline/
#   make apidocs       - the API reference (HTML, from the docstrings, with pdoc) in docs/api/
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO   ?= demo-out
PIPELINE_DEMO ?= demo-pipeline

.PHONY: venv install warmup demo pipeline-demo test bench apidocs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# installing compiles qrelkit's numba kernels into their on-disk cache once (qrelkit warmup, about a
# minute): the first campaign run, the demo's and the test suite's processes then load them
$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e ".[test,web,irds]"
	$(BIN)/qrelkit warmup
	touch $@

install: $(VENV)/.installed

# again after changing a kernel's module (its kernels compile at their next use otherwise, said once)
warmup: install
	$(BIN)/qrelkit warmup

demo: install
	QRELKIT=$(BIN)/qrelkit bash scripts/campaign-demo.sh $(DEMO)

pipeline-demo: install
	QRELKIT=$(BIN)/qrelkit bash scripts/demo.sh $(PIPELINE_DEMO)

# the suite on up to 4 worker processes (pytest-xdist; one per core): 5 min instead of 10 on 2 cores
test: install
	$(BIN)/python -m pytest -n auto --maxprocesses 4

bench: $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[test,web,bench]"
	$(BIN)/python benchmarks/bench_pool.py

apidocs: install
	$(BIN)/python -m pip install -q -e ".[docs,web]"
	$(BIN)/python scripts/build_apidocs.py docs/api

clean:
	rm -rf $(VENV) $(DEMO) $(PIPELINE_DEMO) .pytest_cache docs/api
