"""Shared fixtures: every storage-facing test runs on SQLite and on a real PostgreSQL.

PostgreSQL is found through HOOKINBOX_TEST_POSTGRES_URL (a server where we may create
databases). Without it, PostgreSQL cases are skipped with that reason; with
HOOKINBOX_REQUIRE_POSTGRES=1 (set by .ci/run) an unreachable server fails the run, and so
does any skipped test. Each PostgreSQL test gets a fresh database cloned from a migrated
template, so tests never see each other's rows.

MariaDB is found through HOOKINBOX_TEST_MYSQL_URL (a server where we may create databases),
skipped without it and failed under HOOKINBOX_REQUIRE_MYSQL=1, as PostgreSQL is. Each MariaDB
test gets a fresh database, migrated. The `mysql` backend runs the tests of `MYSQL_TESTS` (the
storage contract and what sits on it); elsewhere its cases are deselected, so that the slow
tests are not tripled.

Redis (claim mode) is found through HOOKINBOX_TEST_REDIS_URL, by default the local server on
127.0.0.1:6379; unreachable, its tests are skipped, or fail under HOOKINBOX_REQUIRE_REDIS=1
(also set by .ci/run, which forbids every skip as soon as either switch is on). Redis tests
keep apart by a key prefix of their own.

RabbitMQ and NATS with JetStream (broker sources and destinations) are found the same way,
through HOOKINBOX_TEST_RABBITMQ_URL (default amqp://guest:guest@127.0.0.1:5672/) and
HOOKINBOX_TEST_NATS_URL (default nats://127.0.0.1:4222), skipped when unreachable and failed
under HOOKINBOX_REQUIRE_RABBITMQ=1 / HOOKINBOX_REQUIRE_NATS=1 (.ci/run sets both); their
tests keep apart by queues and streams of their own, deleted after (tests/support/jetstream.py).

Three tiers (docs/development.md): `make test` runs all but the `long` tests (`LONG_TESTS`,
`make test-long`; CI runs both); `make test-fast` only the tests that run in this process on
SQLite, deselecting the markers `postgres`, `mysql`, `redis`, `rabbitmq`, `nats`, `node` and
`slow`, which are set here from what a test uses (its backend, its fixtures, its modules, its
directory) or by the test itself (`slow`). Under HOOKINBOX_TEST_TIER=fast (set by `make
test-fast`) a test that still reaches PostgreSQL, Redis, a broker or a subprocess fails, naming
the marker it lacks, so the fast tier cannot grow slow unseen.
"""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any, NoReturn

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from hookinbox._storage import Store

# The test kit's fixtures (hookinbox, deliver, run_due, hookinbox_clock), as users opt in.
pytest_plugins = ["hookinbox.testing.pytest"]

POSTGRES_URL = os.environ.get("HOOKINBOX_TEST_POSTGRES_URL", "")
REQUIRE_POSTGRES = os.environ.get("HOOKINBOX_REQUIRE_POSTGRES") == "1"
MYSQL_URL = os.environ.get("HOOKINBOX_TEST_MYSQL_URL", "")
REQUIRE_MYSQL = os.environ.get("HOOKINBOX_REQUIRE_MYSQL") == "1"
REDIS_URL = os.environ.get("HOOKINBOX_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
REQUIRE_REDIS = os.environ.get("HOOKINBOX_REQUIRE_REDIS") == "1"
RABBITMQ_URL = os.environ.get("HOOKINBOX_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")
REQUIRE_RABBITMQ = os.environ.get("HOOKINBOX_REQUIRE_RABBITMQ") == "1"
NATS_URL = os.environ.get("HOOKINBOX_TEST_NATS_URL", "nats://127.0.0.1:4222")
REQUIRE_NATS = os.environ.get("HOOKINBOX_REQUIRE_NATS") == "1"
TEMPLATE = f"hookinbox_test_template_{os.getpid()}"  # one per run: runs may overlap
BACKENDS = ["sqlite", "postgres", "mysql"]
FAST_TIER = os.environ.get("HOOKINBOX_TEST_TIER") == "fast"

MYSQL_TESTS = (
    "storage/",
    "processing/",
    "outbox/",
    "operations/",
    "processes/test_concurrency.py",
    "processes/test_sigkill.py",
    "processes/test_pause.py",
    "processes/test_expunge_race.py",  # an erasure racing a worker process's handler
    "cli/test_encryption.py",  # a rotation SIGKILLed halfway, the start-up check, on MariaDB
    "reliability/test_untrusted_text.py",
    "demo/test_demo.py",
    "frameworks/test_django.py",
    "testing/",
)
"""Where the `mysql` backend's cases run (paths under tests/, by prefix)."""
MYSQL_LONG_TESTS = ("processing/", "outbox/", "operations/")
"""Of those, where the `mysql` cases are the `long` tier's: the layers above storage ask
storage's gateways, whose every statement `make test` runs on MariaDB (storage/), as it runs
the kit and the storm there; `make test-long` (CI runs it) runs these suites on MariaDB too,
so `make test` keeps its ten minutes."""
SERVER_LONG_TESTS = ("frameworks/test_django.py",)
"""Where the cases on PostgreSQL and MariaDB (a `backend` parameter) are the `long` tier's:
each starts a Django project's commands as processes, seconds apiece; `make test` runs them on
SQLite, and Django's store on the server databases through `storage/`'s and the docs' tests
of it; `make test-long` (CI runs it) runs them on all three."""
ASYNC_TESTS = (
    "processing/",
    "outbox/",
    "processes/test_concurrency.py",
    "processes/test_sigkill.py",
    "processes/test_pause.py",
    "testing/",
)
"""Where the `async` driver's cases run (paths under tests/, by prefix): the same tests on an
async database URL (aiosqlite, asyncpg), so on the async worker; not on MariaDB, which has no
async driver in hookinbox (docs/async.md). They are the `long` tier's: `make test` runs each
suite once, on the thread worker, and the async worker's own tests."""
ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
"""A database's sync URL scheme -> the async driver its `async` cases use."""
LONG_TESTS = (
    "bench/",
    "brokers/test_crash.py",
    "claims/test_processes.py",
    "demo/test_demo.py::test_the_demo_proves_exactly_once[postgres",
    "demo/test_demo.py::test_the_demo_proves_exactly_once[mysql",
    "deploy/test_edge.py::test_a_sender_over_the_rate_limit_gets_429_with_retry_after",
    "deploy/test_edge.py::test_a_sender_that_trickles_its_request_is_cut",
    "deploy/test_units_in_systemd.py",
    "processes/",
    "packaging/",
    "docs/test_installs.py",
    "docs/test_frameworks_page.py::test_the_mariadb_lines_put_that_project_on_mariadb",
    "docs/test_testing_page.py::test_the_pytest_section_passes_under_pytest[postgres",
    "docs/test_testing_page.py::test_the_django_section_passes_under_djangos_test_runner[postgres",
    "cli/test_reports.py::test_demo_off_a_terminal_prints_plain_columns",
    "cli/test_errors.py::test_bad_arguments_are_usage_errors",
    "dashboard/test_commands.py::test_dashboard_command_refuses_to_start_without_a_good_token",
    "docs/test_tutorial_page.py",
    "frameworks/test_django.py::test_the_system_check_wants_immediate_sqlite_transactions",
    "frameworks/test_django.py::test_the_worker_keeps_the_projects_logging",
    "frameworks/test_django.py::test_the_worker_logs_to_stderr_without_logging_settings",
    "frameworks/test_django.py::test_a_business_key_written_through_ctx_db_is_named_on_django_connection",
    "frameworks/test_django.py::test_a_worker_killed_after_the_orm_write_commits_neither",
    "processing/test_out_of_order.py::test_the_ordering_guard_is_race_safe",
    "reliability/test_audit_trail.py::test_cli_replays_write_who_when_why_and_what_was_reset",
    "reliability/test_metric_labels.py::test_type_and_source_labels_stay_bounded",
    "docs/test_sdist.py",
    "docs/test_site.py",
    "e2e/test_async_fastapi_storm.py",
    "outbox/test_relay_processes.py",
    "outbox/test_rabbitmq_destination.py::"
    "test_a_relay_killed_after_the_confirm_publishes_again_and_ids_dedupe",
    "outbox/test_rabbitmq_destination.py::test_a_broker_killed_mid_relay_loses_nothing",
    "outbox/test_jetstream_destination.py::"
    "test_a_relay_killed_between_the_puback_and_its_commit_doubles_nothing",
    "outbox/test_jetstream_destination.py::"
    "test_the_server_killed_and_restarted_mid_relay_loses_and_doubles_nothing",
    "operations/test_metrics.py::test_serve_sums_every_process_into_one_metrics_page",
    "operations/test_prune.py::test_20000_old_rows_are_pruned_while_ingest_keeps_answering",
    "operations/test_prune.py::test_one_process_of_many_wins_each_daily_slot",
    "operations/test_prune_race.py",
    "processing/test_failover.py",
    "reliability/test_frozen_database.py",
    "reliability/test_kill_loop.py",
    "reliability/test_mariadb_packet.py",
    "reliability/test_mariadb_read_only.py",
    "reliability/test_mariadb_restart.py",
    "reliability/test_postgres_restart.py",
    "reliability/test_slow_database.py",
    "reliability/test_soak_smoke.py",
    "simulate/test_shop.py",
    "reliability/test_sqlite_disk.py",
    "storage/test_migration_under_load.py",
    "testing/test_check_exactly_once.py",
)
"""The `long` tier (`make test-long`, which CI runs after `make test`): the proofs that take
tens of seconds each by design (crash loops, storms of processes, a database stopped or
frozen under load, the benchmarks' smoke runs, fresh venvs built from the sdist and the
wheel, the site's build, the demo and the simulated shop on the server databases), so that
`make test` stays within ten minutes on two cores (test ids under tests/, by prefix: a
directory, a module, one test of a module, or the start of its parameters' id)."""
SLOW_DIRECTORIES = frozenset(
    {"bench", "cli", "demo", "deploy", "e2e", "ha", "packaging", "processes"}
)
"""Directories of tests/ whose every test starts processes or servers: marked `slow`."""


def _skip_or_fail(message: str, *, required: bool) -> NoReturn:
    """A service a test needs is missing: skipped with `message`, or failed where CI requires
    the service (HOOKINBOX_REQUIRE_*), since CI counts no skip as a pass."""
    if required:
        pytest.fail(message)
    pytest.skip(message)


def _refuse_in_fast_tier(what: str, marker: str) -> None:
    if FAST_TIER:
        pytest.fail(f"a `make test-fast` test reached {what}: mark it {marker}", pytrace=False)


def _admin_engine() -> sa.Engine:
    url = make_url(POSTGRES_URL).set(drivername="postgresql+psycopg")
    return sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)


def _database_url(name: str) -> str:
    url = make_url(POSTGRES_URL).set(drivername="postgresql", database=name)
    return url.render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A migrated template database; skipped (or failed, in CI) without a server."""
    _refuse_in_fast_tier("PostgreSQL", "postgres (a `backend` parameter marks itself)")
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
        _skip_or_fail(message, required=REQUIRE_POSTGRES)
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


@pytest.fixture(scope="session")
def mysql_server() -> str:
    """The MariaDB test server's URL; skipped (or failed, in CI) without one."""
    _refuse_in_fast_tier("MariaDB", "mysql (a `backend` parameter marks itself)")
    if not MYSQL_URL:
        if REQUIRE_MYSQL:
            pytest.fail("HOOKINBOX_REQUIRE_MYSQL=1 but HOOKINBOX_TEST_MYSQL_URL is unset")
        pytest.skip("MariaDB tests need HOOKINBOX_TEST_MYSQL_URL")
    admin = sa.create_engine(_mysql_admin_url(), poolclass=sa.NullPool)
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql("SELECT 1")
    except sa.exc.OperationalError as error:
        message = f"MariaDB at HOOKINBOX_TEST_MYSQL_URL is unreachable: {error.orig}"
        _skip_or_fail(message, required=REQUIRE_MYSQL)
    finally:
        admin.dispose()
    return MYSQL_URL


@pytest.fixture(scope="session")
def mysqlclient(mysql_server: str) -> str:
    """The MariaDB test server, with Django's driver for it (mysqlclient, module MySQLdb):
    `make test` installs it where it builds (it needs libmariadb-dev and pkg-config); the
    tests that need it are skipped without it, or failed in CI."""
    try:
        import MySQLdb  # noqa: F401
    except ImportError:
        message = (
            "Django on MariaDB needs mysqlclient: apt-get install libmariadb-dev pkg-config,"
            " then make test again"
        )
        _skip_or_fail(message, required=REQUIRE_MYSQL)
    return mysql_server


def _mysql_admin_url() -> sa.URL:
    return make_url(MYSQL_URL).set(drivername="mysql+pymysql")


def _mysql_database(migrated: bool) -> Iterator[str]:
    """A fresh utf8mb4 database on the MariaDB test server (the server's default collation:
    hookinbox's tables bring their own), migrated or empty; dropped afterwards."""
    name = f"hookinbox_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(_mysql_admin_url(), poolclass=sa.NullPool)
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    url = make_url(MYSQL_URL).set(database=name).render_as_string(hide_password=False)
    try:
        if migrated:
            store = Store(url)
            store.migrate()
            store.dispose()
        yield url
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["sync", "async"])
def driver(request: pytest.FixtureRequest) -> str:
    """Which driver `db_url` names: the sync one, or an async one (the async worker); the
    `async` cases run only in `ASYNC_TESTS`."""
    return str(request.param)


def async_twin(url: str) -> str:
    """`url` with the async driver of its database (`ASYNC_DRIVERS`)."""
    parsed = make_url(url)
    drivername = ASYNC_DRIVERS[parsed.get_backend_name()]
    return parsed.set(drivername=drivername).render_as_string(hide_password=False)


@pytest.fixture
def db_url(
    backend: str, driver: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh, migrated database on each backend, named with each driver."""
    for url in _database(backend, tmp_path, request):
        yield async_twin(url) if driver == "async" else url


def _database(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'inbox.db'}"
        store = Store(url)
        store.migrate()
        store.dispose()
        yield url
    elif backend == "mysql":
        request.getfixturevalue("mysql_server")
        yield from _mysql_database(migrated=True)
    else:
        template = request.getfixturevalue("postgres_template")
        yield from _postgres_database(template)


@pytest.fixture
def empty_db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database with no tables at all, on each backend."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
    elif backend == "mysql":
        request.getfixturevalue("mysql_server")
        yield from _mysql_database(migrated=False)
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
    _refuse_in_fast_tier("Redis", "redis (the `redis_url` fixture marks itself)")
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as error:
        message = f"Redis at HOOKINBOX_TEST_REDIS_URL ({REDIS_URL}) is unreachable: {error}"
        _skip_or_fail(message, required=REQUIRE_REDIS)
    finally:
        client.close()
    return REDIS_URL


@pytest.fixture(scope="session")
def nats_url() -> str:
    """A reachable NATS server with JetStream; skipped (or failed, in CI) without one."""
    _refuse_in_fast_tier("NATS", "nats (the `nats_url` fixture marks itself)")
    from tests.support.jetstream import reachable

    why = reachable(NATS_URL)
    if why is not None:
        message = f"NATS at HOOKINBOX_TEST_NATS_URL ({NATS_URL}) is unreachable: {why}"
        _skip_or_fail(message, required=REQUIRE_NATS)
    return NATS_URL


@pytest.fixture(scope="session")
def rabbitmq_url() -> str:
    """A reachable RabbitMQ; skipped (or failed, in CI) without one."""
    _refuse_in_fast_tier("RabbitMQ", "rabbitmq (the `rabbitmq_url` fixture marks itself)")
    import asyncio

    import aio_pika

    async def ping() -> None:
        connection = await aio_pika.connect(RABBITMQ_URL, timeout=5)
        await connection.close()

    try:
        asyncio.run(ping())
    except Exception as error:  # refused, timed out, authentication: all say unreachable
        message = (
            f"RabbitMQ at HOOKINBOX_TEST_RABBITMQ_URL ({RABBITMQ_URL}) is unreachable: {error}"
        )
        _skip_or_fail(message, required=REQUIRE_RABBITMQ)
    return RABBITMQ_URL


@pytest.fixture(scope="session")
def npm() -> Path:
    """The npm oracles' directory, installed on first use (tests/testing/npm_oracles.py); a
    test taking it is marked `node`."""
    from tests.testing.npm_oracles import oracle_dir

    return oracle_dir()


# The official SDKs the tests use as judges (PyPI's, and npm's through tests.testing.npm_oracles).
# A test module that imports one is an oracle test: `make test-latest` runs those against the
# newest releases, while `make test` uses the lock (requirements/test.txt, package-lock.json).
ORACLE_PACKAGES = frozenset(
    {
        "stripe", "standardwebhooks", "svix", "slack_sdk", "twilio", "mollie", "paddle_billing",
        "square", "sendgrid", "hubspot", "Adyen", "workos", "tests.testing.npm_oracles",
        "gocardless_pro", "coinbase_commerce", "braintree",
    }
)  # fmt: skip


NODE_CALLS = frozenset({"oracle_dir", "npm_verifies", "npm_judges"})
"""What tests/testing/npm_oracles.py offers: a test that calls one (or takes a fixture named
`npm`) runs Node."""


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


def _names(code: CodeType) -> set[str]:
    """The global names `code` and the functions defined in it use."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            names |= _names(constant)
    return names


def _runs_node(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    code = getattr(function, "__code__", None)
    calls = _names(code) if isinstance(code, CodeType) else set()
    return bool(calls & NODE_CALLS) or "npm" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    kept: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        where = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        if params.get("driver") == "async":
            if not where.startswith(ASYNC_TESTS) or params.get("backend") == "mysql":
                deselected.append(item)
                continue
            # The suites again on the async worker: `make test-long` (CI runs it); `make test`
            # keeps the async worker's own tests (processing/test_async_worker.py, the kit's).
            item.add_marker(pytest.mark.long)
        if "mysql" in map(str, params.values()):
            if not where.startswith(MYSQL_TESTS):
                deselected.append(item)
                continue
            item.add_marker(pytest.mark.mysql)
            if where.startswith(MYSQL_LONG_TESTS):
                item.add_marker(pytest.mark.long)
        if params.get("backend") in ("postgres", "mysql") and where.startswith(SERVER_LONG_TESTS):
            item.add_marker(pytest.mark.long)
        if "mysql_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.mysql)
        kept.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept
    for item in items:
        if _uses_an_oracle(getattr(item, "module", None)):
            item.add_marker(pytest.mark.oracle)
        if _runs_node(item):
            item.add_marker(pytest.mark.node)
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        fixtures = getattr(item, "fixturenames", ())
        # A parameter "postgres" (`backend`, the kit's `hookinbox_database`, ...) or the
        # template itself: the test runs on the PostgreSQL test server.
        if "postgres_template" in fixtures or "postgres" in map(str, params.values()):
            item.add_marker(pytest.mark.postgres)
        if "redis_url" in fixtures:
            item.add_marker(pytest.mark.redis)
        if "rabbitmq_url" in fixtures:
            item.add_marker(pytest.mark.rabbitmq)
        if "nats_url" in fixtures:
            item.add_marker(pytest.mark.nats)
        parts = item.path.relative_to(root).parts if item.path.is_relative_to(root) else ()
        if len(parts) > 1 and parts[0] in SLOW_DIRECTORIES:
            item.add_marker(pytest.mark.slow)
        if item.nodeid.removeprefix("tests/").startswith(LONG_TESTS):
            item.add_marker(pytest.mark.long)


@pytest.fixture(autouse=FAST_TIER)
def _nothing_slow_in_fast_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the fast tier, starting a process (a subprocess, or multiprocessing's), or connecting
    to the PostgreSQL test server (however the test found its URL), fails the test that does
    (see the docstring). A test that connects to an unreachable port on purpose still may."""
    import psycopg

    original = subprocess.Popen.__init__
    connect = psycopg.connect
    port = str(make_url(POSTGRES_URL).port or 5432) if POSTGRES_URL else None

    def refuse(self: subprocess.Popen[bytes], *args: object, **kwargs: object) -> None:
        _refuse_in_fast_tier(f"a subprocess ({args[0] if args else kwargs.get('args')!r})", "slow")
        original(self, *args, **kwargs)  # type: ignore[arg-type]  # pragma: no cover

    def guarded(*args: Any, **kwargs: Any) -> Any:
        given = " ".join(map(str, args)) + f" port={kwargs.get('port', 5432)}"
        if port is not None and f"port={port}" in given.replace(":", " port="):
            _refuse_in_fast_tier("the PostgreSQL test server", "postgres")
        return connect(*args, **kwargs)

    def refuse_process(self: multiprocessing.process.BaseProcess) -> None:
        _refuse_in_fast_tier(f"a process ({self.name})", "slow")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse_process)
    monkeypatch.setattr(psycopg, "connect", guarded)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In CI a skipped test is a failed run: nothing may pass by not running."""
    if not (REQUIRE_POSTGRES or REQUIRE_REDIS or REQUIRE_MYSQL or REQUIRE_RABBITMQ or REQUIRE_NATS):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if skipped:
        print(f"\n{skipped} test(s) were skipped; HOOKINBOX_REQUIRE_* forbids skips")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
