# One command each for a newcomer on a fresh machine: `make demo`, `make test`.
# Both install first (a virtualenv in .venv with the project, its extras and every plugins/* distribution).
# `make demo-registry` publishes every plugins/* distribution into a local registry with its catalog site.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PLUGINS := $(wildcard plugins/*/pyproject.toml)
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=
DEMO_REGISTRY ?= udm-demo-out/registry
# the marketplace's browser tests drive the distribution's chromium (Playwright never downloads one)
CHROMIUM := /usr/bin/chromium
SUDO   := $(if $(filter 0,$(shell id -u)),,sudo)

export PYSPARK_PYTHON := $(abspath $(BIN)/python)
export PYSPARK_DRIVER_PYTHON := $(abspath $(BIN)/python)

.PHONY: install demo demo-registry screenshots test test-fast lint bench clean

install: $(STAMP)

# -qq: pip prints errors only (setuptools' notes about editable installs and pip's index notices are
# not errors); a failed install still shows pip's error and stops make.
$(STAMP): pyproject.toml setup.py $(PLUGINS)
	@echo "installing udmkit and its plugins into $(VENV) (a few minutes the first time)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -qq --upgrade pip
	@$(BIN)/python -m pip install -qq -e ".[spark,dev,demo]" $(foreach p,$(PLUGINS),-e $(dir $(p)))
	@touch $(STAMP)

# Only when it is missing; a failed install stops make (the browser tests never skip for want of it).
$(CHROMIUM):
	@echo "installing the distribution's chromium for the browser tests (apt-get)"
	@$(SUDO) apt-get update -qq >/dev/null
	@DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null

demo: install
	$(BIN)/udm demo

# Every plugins/* distribution, built and contract-checked, in a registry with its catalog site
# (publishing what is already there is a no-op). Preview: .venv/bin/udm registry serve --registry DIR
demo-registry: install
	@for p in $(dir $(PLUGINS)); do $(BIN)/udm registry publish $$p --registry $(DEMO_REGISTRY) --no-isolation || exit 1; done
	@echo "demo registry: $(DEMO_REGISTRY)"
	@echo "preview it: .venv/bin/udm registry serve --registry $(DEMO_REGISTRY)"

# docs/img/marketplace-*.png: the demo registry's index and one UDM page, at 1280 and 390 px wide
screenshots: demo-registry $(CHROMIUM)
	$(BIN)/python tests/marketplace_screenshots.py $(DEMO_REGISTRY) docs/img

test: install $(CHROMIUM)
	$(BIN)/python -m pytest -n 2 --durations=30 $(PYTEST_ARGS)

test-fast: install $(CHROMIUM)
	$(BIN)/python -m pytest -n 2 -m "not spark and not slow" $(PYTEST_ARGS)

# lint-imports reads the `udm` tree from the disk, from the current directory first; setup.py maps the role
# folders onto `udm`, so the tree is linked up in build/import-graph and read from there (the contracts:
# pyproject.toml's [tool.importlinter])
lint: install
	$(BIN)/ruff check sdk host registry udm plugins tests bench
	$(BIN)/mypy sdk host
	@rm -rf build/import-graph && mkdir -p build/import-graph/udm && cp udm/__init__.py build/import-graph/udm/
	@for r in sdk host registry templates; do ln -s ../../../$$r build/import-graph/udm/$$r; done
	cd build/import-graph && ../../$(BIN)/lint-imports ../../pyproject.toml --no-cache

bench: install
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
