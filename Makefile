# Two entry points (see README): `make demo` shows hookinbox working on SQLite, `make test` checks it.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
APP ?= hookinbox.examples.shop:inbox

# What the tests install is locked (docs/development.md): requirements/test.txt pins every
# Python package of `.[test]` (transitive ones included) and tests/testing/package-lock.json the
# npm oracles, so a fresh clone tests with exactly what CI last passed with. The library's own
# ranges in pyproject.toml stay ranges: users need them. `make lock` refreshes both locks;
# `make test-latest` tries the newest releases of the oracles without touching the lock.
LOCK = requirements/test.txt
PIP_VERSION = 26.3
UV_VERSION = 0.13.9
LATEST_VENV ?= .venv-latest
# The documentation site's tools (MkDocs, Material, mkdocstrings), locked apart from the tests'
# in a venv of their own: the two locks may pin a shared package (Markdown, Pygments) apart.
DOCS_LOCK = requirements/docs.txt
DOCS_VENV ?= .venv-docs

.PHONY: demo serve docs dist test mysqlclient test-long test-fast test-ha test-latest lock lint check clean

# `make demo` and `make serve` install only what they run (the server and the simulator, at
# the locked versions: about 80 MB); `make test` the whole locked tool chain. The test install
# includes the demo's, so it marks both as done.
DEMO_EXTRAS = server,simulate

$(BIN)/.installed: pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet 'pip==$(PIP_VERSION)'
	$(BIN)/python -m pip install --quiet -c $(LOCK) -e '.[test]'
	touch $@ $(BIN)/.demo-installed

# mysqlclient (requirements/mysqlclient.in) builds only where the MariaDB client library and
# pkg-config are installed: tried on every run until it is there, one line when it cannot be.
MYSQLCLIENT = requirements/mysqlclient.in
mysqlclient: $(BIN)/.installed
	@$(BIN)/python -c 'import MySQLdb' 2>/dev/null \
		|| $(BIN)/python -m pip install --quiet -c $(LOCK) -r $(MYSQLCLIENT) >/dev/null 2>&1 \
		|| echo "mysqlclient did not build (it needs libmariadb-dev and pkg-config):" \
			"the Django store's MariaDB tests will be skipped"

$(BIN)/.demo-installed: pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c $(LOCK) \
		-e '.[$(DEMO_EXTRAS)]'
	touch $@

$(DOCS_VENV)/bin/.installed: $(DOCS_LOCK)
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet 'pip==$(PIP_VERSION)'
	$(DOCS_VENV)/bin/python -m pip install --quiet -r $(DOCS_LOCK)
	touch $@

# The site (mkdocs.yml) into site/, strictly: a broken link or anchor, a page left out of the
# navigation or an API name without its docstring's page fails the build.
docs: $(DOCS_VENV)/bin/.installed
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict

# The release files (docs/releases.md): the sdist, and the wheel built from it, into dist/;
# checked as a package index renders them (twine check); then the wheel installed into a fresh
# venv as docs/install.md says, and README.md's example and `hookinbox demo` run against it
# (tests/packaging/dist_check.py). CI runs it.
dist: $(BIN)/.installed
	rm -rf dist
	$(BIN)/python -m build --quiet --outdir dist .
	$(BIN)/twine check --strict dist/*
	$(BIN)/python -m tests.packaging.dist_check

demo: $(BIN)/.demo-installed
	$(BIN)/hookinbox demo

serve: $(BIN)/.demo-installed
	$(BIN)/hookinbox serve $(APP)

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests bench docs-site
	$(BIN)/ruff format --check src tests bench docs-site
	$(BIN)/mypy
	$(BIN)/lint-imports

# `make test` leaves out the `long` tier (tests/conftest.py's LONG_TESTS: crash loops, process
# storms, databases stopped under load, the benchmarks' smoke runs, fresh-venv builds) to stay
# within ten minutes on two cores; `make test-long` runs it, and CI runs both. Three workers on
# two cores: the suite waits on its subprocesses and databases more than it computes (two
# workers kept the cores 72 % busy; three cut the run from 10.2 to 8.0 minutes).
test: lint mysqlclient
	$(BIN)/python -m pytest -n 3 -m 'not ha and not long' $(PYTEST_ARGS)

test-long: $(BIN)/.installed mysqlclient
	$(BIN)/python -m pytest -n 2 -m 'long and not ha' $(PYTEST_ARGS)

# The tier to run on every change (docs/development.md): the tests that run in process on
# SQLite, a few minutes; no lint, PostgreSQL, Redis, Node or subprocess (one that reaches any
# of them fails, naming the marker it lacks). `make test` runs all but the long tier.
FAST = not slow and not long and not postgres and not mysql and not redis and not rabbitmq and not nats and not node and not ha
test-fast: $(BIN)/.installed
	HOOKINBOX_TEST_TIER=fast $(BIN)/python -m pytest -n 2 -m '$(FAST)' $(PYTEST_ARGS)

# The multi-host test bed (tests/ha): root, HAProxy and pg_auto_failover; a few minutes.
test-ha: $(BIN)/.installed
	$(BIN)/python -m pytest -p no:xdist -m ha tests/ha $(PYTEST_ARGS)

# Resolve the newest releases the ranges in pyproject.toml allow, and the npm oracles' tree.
lock: $(BIN)/.installed
	$(BIN)/python -m pip install --quiet 'uv==$(UV_VERSION)'
	$(BIN)/uv pip compile pyproject.toml $(MYSQLCLIENT) --extra test --universal --python-version 3.11 \
		--upgrade --no-header --quiet -o $(LOCK)
	$(BIN)/uv pip compile pyproject.toml --extra docs --universal --python-version 3.11 \
		--upgrade --no-header --quiet -o $(DOCS_LOCK)
	cd tests/testing && rm -f package-lock.json && \
		npm install --package-lock-only --no-audit --no-fund --silent

# The oracle tests (provider SDKs as judges) against the newest releases, in a venv of their
# own; not part of CI's required path: run it on purpose, then `make lock` if it passes.
test-latest:
	rm -rf $(LATEST_VENV)
	$(PYTHON) -m venv $(LATEST_VENV)
	$(LATEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LATEST_VENV)/bin/python -m pip install --quiet --upgrade -e '.[test]'
	HOOKINBOX_NPM_ORACLES=latest HOOKINBOX_REQUIRE_NODE=1 \
		$(LATEST_VENV)/bin/python -m pytest -n 2 -m oracle $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(LATEST_VENV) $(DOCS_VENV) site dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
