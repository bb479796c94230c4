"""Shared fixtures: every storage-facing test runs on SQLite and on a real PostgreSQL.

PostgreSQL is found through HOOKINBOX_TEST_POSTGRES_URL (a server where we may create
databases). Without it, PostgreSQL cases are skipped with that reason; with
HOOKINBOX_REQUIRE_POSTGRES=1 (set by .ci/run) an unreachable server fails the run, and so
does any skipped test. Each PostgreSQL test gets a fresh database cloned from a migrated
template, so tests never see each other's rows.

Redis (claim mode) is found through HOOKINBOX_TEST_REDIS_URL, by default the local server on
127.0.0.1:6379; unreachable, its tests are skipped, or fail under HOOKINBOX_REQUIRE_REDIS=1
(also set by .ci/run, which forbids every skip as soon as either switch is on). Redis tests
keep apart by a key prefix of their own.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from hookinbox._storage import Store

# The test kit's fixtures (hookinbox, deliver, run_due, hookinbox_clock), as users opt in.
pytest_plugins = ["hookinbox.testing.pytest"]

POSTGRES_URL = os.environ.get("HOOKINBOX_TEST_POSTGRES_URL", "")
REQUIRE_POSTGRES = os.environ.get("HOOKINBOX_REQUIRE_POSTGRES") == "1"
REDIS_URL = os.environ.get("HOOKINBOX_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
REQUIRE_REDIS = os.environ.get("HOOKINBOX_REQUIRE_REDIS") == "1"
TEMPLATE = f"hookinbox_test_template_{os.getpid()}"  # one per run: runs may overlap
BACKENDS = ["sqlite", "postgres"]


def _admin_engine() -> sa.Engine:
    url = make_url(POSTGRES_URL).set(drivername="postgresql+psycopg")
    return sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)


def _database_url(name: str) -> str:
    url = make_url(POSTGRES_URL).set(drivername="postgresql", database=name)
    return url.render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A migrated template database; skipped (or failed, in CI) without a server."""
    if not POSTGRES_URL:
        if REQUIRE_POSTGRES:
            pytest.fail("HOOKINBOX_REQUIRE_POSTGRES=1 but HOOKINBOX_TEST_POSTGRES_URL is unset")
        pytest.skip("PostgreSQL tests need HOOKINBOX_TEST_POSTGRES_URL")
    admin = _admin_engine()
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)'))
            connection.execute(sa.text(f'CREATE DATABASE "{TEMPLATE}"'))
    except sa.exc.OperationalError as error:
        message = f"PostgreSQL at HOOKINBOX_TEST_POSTGRES_URL is unreachable: {error.orig}"
        if REQUIRE_POSTGRES:
            pytest.fail(message)
        pytest.skip(message)
    store = Store(_database_url(TEMPLATE))
    store.migrate()
    store.dispose()
    yield TEMPLATE
    with admin.connect() as connection:
        connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)'))
    admin.dispose()


def _postgres_database(template: str | None, clause: str = "") -> Iterator[str]:
    """A fresh database cloned from `template`, or created with `clause` (ENCODING ...)."""
    name = f"hookinbox_test_{uuid.uuid4().hex[:12]}"
    admin = _admin_engine()
    clause = f' TEMPLATE "{template}"' if template else clause
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"{clause}'))
    try:
        yield _database_url(name)
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, migrated database on each backend."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'inbox.db'}"
        store = Store(url)
        store.migrate()
        store.dispose()
        yield url
    else:
        template = request.getfixturevalue("postgres_template")
        yield from _postgres_database(template)


@pytest.fixture
def empty_db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database with no tables at all, on each backend."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
    else:
        request.getfixturevalue("postgres_template")  # skips or fails like the others
        yield from _postgres_database(None)


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    store = Store(db_url)
    yield store
    store.dispose()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A reachable Redis; skipped (or failed, in CI) without one."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as error:
        message = f"Redis at HOOKINBOX_TEST_REDIS_URL ({REDIS_URL}) is unreachable: {error}"
        if REQUIRE_REDIS:
            pytest.fail(message)
        pytest.skip(message)
    finally:
        client.close()
    return REDIS_URL


# The official SDKs the tests use as judges (PyPI's, and npm's through tests.testing.npm_oracles).
# A test module that imports one is an oracle test: `make test-latest` runs those against the
# newest releases, while `make test` uses the lock (requirements/test.txt, package-lock.json).
ORACLE_PACKAGES = frozenset(
    {
        "stripe", "standardwebhooks", "svix", "slack_sdk", "twilio", "mollie", "paddle_billing",
        "square", "sendgrid", "hubspot", "Adyen", "workos", "tests.testing.npm_oracles",
    }
)  # fmt: skip


def _uses_an_oracle(module: ModuleType | None) -> bool:
    if module is None:
        return False
    for value in vars(module).values():
        name = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", "")
        if isinstance(name, str) and (
            name in ORACLE_PACKAGES or name.split(".")[0] in ORACLE_PACKAGES
        ):
            return True
    return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _uses_an_oracle(getattr(item, "module", None)):
            item.add_marker(pytest.mark.oracle)
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == "postgres":
            item.add_marker(pytest.mark.postgres)
        if "redis_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.redis)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In CI a skipped test is a failed run: nothing may pass by not running."""
    if not (REQUIRE_POSTGRES or REQUIRE_REDIS):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if skipped:
        print(f"\n{skipped} test(s) were skipped; HOOKINBOX_REQUIRE_* forbids skips")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
