# The two commands of the README: `make play` and `make test`.
# `make play` installs what the game needs; `make test` adds the development tools.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed
DEV := $(VENV)/.installed-dev
# --no-compile, then COMPILE: pip compiles each file on one core; compileall uses every
# core. Bytecode is written at install because Python does not write it on import where
# PYTHONDONTWRITEBYTECODE is set (as on our CI machines): each process then compiled numba,
# numpy and our packages from source, about 0.7 s a start (a server, a bot, a test's subprocess).
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile
# Not pip's, setuptools' or the packages' own tests: nothing of ours imports them.
COMPILE := $(BIN)/python -m compileall -q -j 0 -x '/(pip|setuptools|pkg_resources|tests?)/' \
	$(VENV)/lib protocol engine server client >/dev/null \
	|| echo 'make: some files were not compiled to bytecode; Python compiles them on import'

.PHONY: play test test-slow lint typecheck bench clean venv

venv: $(RUNTIME)

$(RUNTIME): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	$(COMPILE)
	touch $(RUNTIME)

$(DEV): $(RUNTIME)
	$(PIP) -e '.[dev]'
	$(COMPILE)
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
