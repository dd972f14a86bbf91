# The two commands of the README: `make play` and `make test`.
# `make play` installs what the game needs; `make test` adds the development tools.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed
DEV := $(VENV)/.installed-dev
# --no-compile: Python writes each module's bytecode on first import instead of pip
# compiling every file of numpy, numba and textual at install time.
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile

.PHONY: play test test-slow lint typecheck bench clean venv

venv: $(RUNTIME)

$(RUNTIME): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	touch $(RUNTIME)

$(DEV): $(RUNTIME)
	$(PIP) -e '.[dev]'
	touch $(DEV)

play: $(RUNTIME)
	$(BIN)/noughts play $(ARGS)

test: $(DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest $(ARGS)

test-slow: $(DEV)
	$(BIN)/python -m pytest -m slow $(ARGS)

typecheck: $(DEV)
	$(BIN)/mypy

bench: $(RUNTIME)
	$(BIN)/noughts bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
