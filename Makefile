# Two commands do everything on a fresh machine with Python 3.11+:
#   make demo   - create .venv, install qrelkit, generate a campaign and run the pipeline on it, then the
#                 same procedure as one campaign (campaign init, run --oracle, report: scripts/campaign-demo.sh)
#   make test   - create .venv, install qrelkit with the test and web extras, run the test suite
#   make apidocs - the API reference (HTML, from the docstrings, with pdoc) in docs/api/
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO   ?= demo-out

.PHONY: venv install demo campaign-demo test bench apidocs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e ".[test,web]"
	touch $@

install: $(VENV)/.installed

demo: install
	QRELKIT=$(BIN)/qrelkit bash scripts/demo.sh $(DEMO)
	QRELKIT=$(BIN)/qrelkit bash scripts/campaign-demo.sh $(DEMO)/campaign-run

campaign-demo: install
	QRELKIT=$(BIN)/qrelkit bash scripts/campaign-demo.sh demo-campaign

test: install
	$(BIN)/python -m pytest

bench: $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[test,web,bench]"
	$(BIN)/python benchmarks/bench_pool.py

apidocs: install
	$(BIN)/python -m pip install -q -e ".[docs,web]"
	$(BIN)/python scripts/build_apidocs.py docs/api

clean:
	rm -rf $(VENV) $(DEMO) demo-campaign .pytest_cache docs/api
