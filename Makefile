# Two entry points (see README): `make demo` shows hookinbox working on SQLite, `make test` checks it.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
APP ?= hookinbox.examples.shop:inbox

.PHONY: demo serve test test-ha lint check clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/hookinbox demo

serve: $(BIN)/.installed
	$(BIN)/hookinbox serve $(APP)

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

# The multi-host test bed (tests/ha): root, HAProxy and pg_auto_failover; a few minutes.
test-ha: $(BIN)/.installed
	$(BIN)/python -m pytest -p no:xdist -m ha tests/ha $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
