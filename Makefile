# One command each for a newcomer on a fresh machine: `make demo`, `make test`.
# Both install first (a virtualenv in .venv with the project, its extras and every plugins/* distribution).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PLUGINS := $(wildcard plugins/*/pyproject.toml)
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

export PYSPARK_PYTHON := $(abspath $(BIN)/python)
export PYSPARK_DRIVER_PYTHON := $(abspath $(BIN)/python)

.PHONY: install demo test test-fast lint bench clean

install: $(STAMP)

# -qq: pip prints errors only (setuptools' notes about editable installs and pip's index notices are
# not errors); a failed install still shows pip's error and stops make.
$(STAMP): pyproject.toml setup.py $(PLUGINS)
	@echo "installing udmkit and its plugins into $(VENV) (a few minutes the first time)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -qq --upgrade pip
	@$(BIN)/python -m pip install -qq -e ".[spark,dev,demo]" $(foreach p,$(PLUGINS),-e $(dir $(p)))
	@touch $(STAMP)

demo: install
	$(BIN)/udm demo

test: install
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

test-fast: install
	$(BIN)/python -m pytest -n 2 -m "not spark and not slow" $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check sdk host registry udm plugins tests bench
	$(BIN)/mypy sdk host

bench: install
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
