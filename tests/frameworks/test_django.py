"""Django: migrations, the view, the worker command, and one transaction for ORM and inbox."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

import hookinbox.django.migrations
from hookinbox import Event, Status
from hookinbox._storage import LATEST_VERSION, Store
from hookinbox._storage._schema import metadata, schema_versions
from hookinbox.django._migration import UpgradeSchema
from tests.conftest import BACKENDS
from tests.django_project import SECRET
from tests.frameworks.contract import check_contract, checkout_event, wait_for_order
from tests.frameworks.django_project import PROBE, SHOP, DjangoProject
from tests.support.signing import stripe_delivery
from tests.support.workers import wait_for

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Both databases, unlike the other adapters: Django's store adopts Django's own
    connection, whose database (and Django's migrations on it) decides the dialect."""
    if request.param == "mysql":
        request.getfixturevalue("mysqlclient")  # Django's MySQL backend's driver
    return str(request.param)


@pytest.fixture
def probe(empty_db_url: str) -> DjangoProject:
    """The probe project on an empty database, migrated by `manage.py migrate`."""
    project = DjangoProject(PROBE, {"PROBE_DATABASE_URL": empty_db_url})
    project.manage("migrate")
    return project


@pytest.fixture
def store(empty_db_url: str, probe: DjangoProject) -> Iterator[Store]:
    """hookinbox's own view of the project's database, to read what happened."""
    store = Store(empty_db_url, auto_migrate=False)
    yield store
    store.dispose()


def post(base_url: str, source: str, event_id: str, event_type: str, **data: Any) -> httpx.Response:
    event = {
        "id": event_id,
        "type": event_type,
        "created": int(time.time()),
        "data": {"object": data},
    }
    headers, body = stripe_delivery(event, SECRET)
    return httpx.post(f"{base_url}/webhooks/{source}", headers=headers, content=body, timeout=30)


def marks(store: Store) -> set[str]:
    with store.reading() as connection:
        return set(connection.execute(sa.text("SELECT name FROM probe_mark")).scalars())


def stored(store: Store, event_id: str, source: str = "stripe") -> Event:
    event = store.get_event(source, event_id)
    assert event is not None, f"{source} {event_id} was not stored"
    return event


# -- migrations ------------------------------------------------------------------------------


def test_django_migrations_build_hookinbox_schema(store: Store, probe: DjangoProject) -> None:
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = [d for d in compare_metadata(context, metadata) if "hookinbox_" in repr(d)]
        versions = connection.execute(sa.select(schema_versions.c.version)).scalars().all()
    assert differences == []
    assert versions == list(range(1, LATEST_VERSION + 1))
    assert store.migrate() == (LATEST_VERSION, LATEST_VERSION)  # `hookinbox migrate` agrees
    assert "[X] 0001_initial" in probe.manage("showmigrations", "hookinbox").stdout


def test_a_database_hookinbox_migrated_adopts_django_migrations(db_url: str) -> None:
    project = DjangoProject(PROBE, {"PROBE_DATABASE_URL": db_url})  # db_url: migrated already
    project.manage("migrate")
    store = Store(db_url, auto_migrate=False)
    with store.engine.connect() as connection:
        versions = connection.execute(sa.select(schema_versions.c.version)).scalars().all()
    store.dispose()
    assert versions == list(range(1, LATEST_VERSION + 1))  # no step ran twice


def test_the_newest_django_migration_reaches_the_newest_schema() -> None:
    package = hookinbox.django.migrations
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name[0].isdigit())
    newest = importlib.import_module(f"{package.__name__}.{names[-1]}").Migration
    operation = newest.operations[-1]
    assert isinstance(operation, UpgradeSchema)
    assert operation.version == LATEST_VERSION, "add a Django migration for the new schema step"


def test_without_migrations_the_worker_says_what_to_run(empty_db_url: str) -> None:
    project = DjangoProject(PROBE, {"PROBE_DATABASE_URL": empty_db_url})
    failed = project.manage("hookinbox_worker", "--until-idle", check=False)
    assert failed.returncode != 0
    assert "python manage.py migrate hookinbox" in failed.stderr


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(
    ("variable", "value"),
    [("HOOKINBOX_LEASE_SECONDS", "nan"), ("HOOKINBOX_CONCURRENCY", "x")],
)
def test_the_worker_refuses_a_hostile_variable(
    empty_db_url: str, variable: str, value: str
) -> None:
    """As `hookinbox worker` does, with the same ranges: `nan` was taken (and `x` raised a
    ValueError's traceback from the command's arguments) before issue 45."""
    project = DjangoProject(PROBE, {"PROBE_DATABASE_URL": empty_db_url, variable: value})
    refused = project.manage("hookinbox_worker", "--until-idle", check=False)
    assert refused.returncode == 2, (refused.returncode, refused.stderr)
    assert "Traceback" not in refused.stderr
    flag = "--" + variable.removeprefix("HOOKINBOX_").lower().replace("_", "-")
    assert f"argument {flag}: {value!r} is not" in refused.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("backend", ["mysql"])
@pytest.mark.usefixtures("mysqlclient")
@pytest.mark.parametrize(
    ("option", "value", "refusal"),
    [
        (
            "ISOLATION_LEVEL",
            "repeatable read",
            "runs REPEATABLE READ; hookinbox needs READ COMMITTED",
        ),
        # None: Django sets no level, the server's default (MariaDB's REPEATABLE READ) stays.
        ("ISOLATION_LEVEL", "", "runs REPEATABLE READ; hookinbox needs READ COMMITTED"),
        ("CHARSET", "utf8mb3", "speaks utf8mb3; hookinbox needs utf8mb4"),
    ],
)
def test_mariadb_settings_hookinbox_cannot_run_on_are_refused_in_one_line(
    empty_db_url: str, option: str, value: str, refusal: str
) -> None:
    project = DjangoProject(
        PROBE, {"PROBE_DATABASE_URL": empty_db_url, f"PROBE_MYSQL_{option}": value}
    )
    migrate = project.manage("migrate", check=False)
    assert migrate.returncode != 0
    assert refusal in migrate.stderr.strip().splitlines()[-1]
    worker = project.manage("hookinbox_worker", "--until-idle", check=False)
    assert worker.returncode == 2  # as `hookinbox worker` exits on a configuration error
    assert worker.stderr.strip().startswith("CommandError: Django's MySQL connection")
    assert refusal in worker.stderr and len(worker.stderr.strip().splitlines()) == 1


def test_the_system_check_wants_immediate_sqlite_transactions(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'check.db'}"
    deferred = DjangoProject(
        PROBE, {"PROBE_DATABASE_URL": url, "PROBE_SQLITE_TRANSACTION_MODE": "DEFERRED"}
    )
    assert "hookinbox.W001" in deferred.manage("check").stderr
    immediate = DjangoProject(PROBE, {"PROBE_DATABASE_URL": url})
    assert "hookinbox.W001" not in immediate.manage("check").stderr


# -- the worker's logs -------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_worker_logs_to_stderr_without_logging_settings(probe: DjangoProject) -> None:
    with probe.server() as base_url:
        post(base_url, "stripe", "evt_logged", "probe.commit")
    worker = probe.manage("hookinbox_worker", "--until-idle")
    # As `hookinbox worker` logs it: time, level, logger, the attempt's line.
    line = next((x for x in worker.stderr.splitlines() if "evt_logged" in x), None)
    assert line is not None, worker.stderr
    assert re.search(
        r"INFO +hookinbox\.worker: stripe evt_logged \(probe\.commit\) attempt 1", line
    )
    assert "evt_logged" not in worker.stdout

    quiet = DjangoProject(PROBE, {**probe.env, "HOOKINBOX_LOG_LEVEL": "warning"})
    with quiet.server() as base_url:
        post(base_url, "stripe", "evt_quiet", "probe.commit")
    assert "evt_quiet" not in quiet.manage("hookinbox_worker", "--until-idle").stderr


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_worker_keeps_the_projects_logging(probe: DjangoProject) -> None:
    configured = DjangoProject(PROBE, {**probe.env, "PROBE_LOGGING": "INFO"})
    with configured.server() as base_url:
        post(base_url, "stripe", "evt_routed", "probe.commit")
    worker = configured.manage("hookinbox_worker", "--until-idle")
    assert "project-log INFO hookinbox.worker stripe evt_routed" in worker.stdout, worker.stdout
    assert "evt_routed" not in worker.stderr  # not twice: once, where the project sends it

    silenced = DjangoProject(PROBE, {**probe.env, "PROBE_LOGGING": "WARNING"})
    with silenced.server() as base_url:
        post(base_url, "stripe", "evt_below", "probe.commit")
    worker = silenced.manage("hookinbox_worker", "--until-idle", "--log-level", "debug")
    assert "evt_below" not in worker.stdout + worker.stderr  # the project's level holds


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_worker_refuses_a_log_level_it_does_not_know(probe: DjangoProject) -> None:
    wrong = DjangoProject(PROBE, {**probe.env, "HOOKINBOX_LOG_LEVEL": "loud"})
    refused = wrong.manage("hookinbox_worker", "--until-idle", check=False)
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert "argument --log-level: 'loud' is not one of" in refused.stderr.strip().splitlines()[-1]


# -- one transaction ---------------------------------------------------------------------------


def test_orm_writes_and_the_processed_mark_commit_or_roll_back_together(
    probe: DjangoProject, store: Store
) -> None:
    with probe.server() as base_url:
        for event_id, event_type in [
            ("evt_commit", "probe.commit"),
            ("evt_raise", "probe.raise"),
            ("evt_swallow", "probe.swallow"),
        ]:
            assert post(base_url, "stripe", event_id, event_type).json()["status"] == "accepted"
    assert marks(store) == set()  # nothing runs at ingest
    probe.manage("hookinbox_worker", "--until-idle")

    assert marks(store) == {"evt_commit"}  # the two failures left no ORM row behind
    committed = stored(store, "evt_commit")
    assert (committed.status, committed.outcome) == (Status.PROCESSED, "handled")
    # In UTC whatever the session's time zone (the probe's MariaDB sessions run in +09:00).
    assert committed.processed_at is not None
    for moment in (committed.received_at, committed.processed_at):
        assert abs(moment - datetime.now(UTC)) < timedelta(minutes=5)
    raised = stored(store, "evt_raise")
    assert (raised.status, raised.attempts, raised.processed_at) == (Status.PENDING, 1, None)
    assert raised.last_error is not None
    assert raised.last_error.startswith("RuntimeError: raised after the ORM write")
    swallowed = stored(store, "evt_swallow")
    assert swallowed.status is Status.PENDING
    assert swallowed.last_error is not None
    assert swallowed.last_error.startswith("TransactionBroken: a database error inside")


def test_a_business_key_written_through_ctx_db_is_named_on_django_connection(
    probe: DjangoProject, store: Store
) -> None:
    with probe.server() as base_url:
        for event_id in ("evt_key_first", "evt_key_again"):
            post(base_url, "stripe", event_id, "probe.business_key", key="order-1")
            probe.manage("hookinbox_worker", "--until-idle")  # one after the other
    assert marks(store) == {"order-1"}
    assert stored(store, "evt_key_first").outcome == "handled"
    again = stored(store, "evt_key_again")
    assert (again.status, again.outcome) == (Status.PROCESSED, "business_duplicate")


@pytest.mark.parametrize("backend", ["mysql"])
@pytest.mark.usefixtures("mysqlclient")
def test_a_deadlock_the_handler_ignores_rolls_back_claim_and_orm_writes_on_mariadb(
    probe: DjangoProject, store: Store
) -> None:
    with store.transaction() as connection:  # the two rows the handler's deadlock locks
        connection.execute(sa.text("INSERT INTO probe_mark (name) VALUES ('lock-a'), ('lock-b')"))
    with probe.server() as base_url:
        post(base_url, "stripe", "evt_deadlock", "probe.deadlock")
        post(base_url, "stripe", "evt_session", "probe.session")
    probe.manage("hookinbox_worker", "--until-idle", "--concurrency", "1")

    # InnoDB rolled the handler's transaction back whole; hookinbox refused to commit what
    # the handler did after it, so neither the ORM row nor a processed mark is left.
    assert "evt_deadlock" not in marks(store)
    lost = stored(store, "evt_deadlock")
    assert (lost.status, lost.attempts, lost.processed_at) == (Status.PENDING, 1, None)
    assert lost.last_error is not None
    assert "rolled back by a deadlock" in lost.last_error
    # Django's session is as Django set it up: hookinbox changed neither zone nor isolation.
    assert "evt_session +09:00 READ-COMMITTED" in marks(store)


def test_inline_handlers_commit_with_the_delivery_or_keep_nothing(
    probe: DjangoProject, store: Store
) -> None:
    with probe.server() as base_url:
        accepted = post(base_url, "inline", "evt_inline_ok", "probe.commit")
        refused = post(base_url, "inline", "evt_inline_fail", "probe.raise")
    assert (accepted.status_code, accepted.json()["status"]) == (200, "accepted")
    assert (refused.status_code, refused.json()["error"]) == (503, "not_processed")
    assert marks(store) == {"evt_inline_ok"}
    assert stored(store, "evt_inline_ok", "inline").status is Status.PROCESSED
    assert store.get_event("inline", "evt_inline_fail") is None


def test_a_worker_killed_after_the_orm_write_commits_neither(
    probe: DjangoProject, store: Store, tmp_path: Path
) -> None:
    ready = tmp_path / "handler-wrote"
    with probe.server() as base_url:
        post(base_url, "stripe", "evt_hang", "probe.hang", ready_file=str(ready))
    worker = probe.worker("--lease-seconds", "600")
    try:
        wait_for(ready.exists, timeout=60, what="the handler's ORM write", describe=worker.describe)
        assert worker.kill() == -signal.SIGKILL
    finally:
        worker.close()
    assert marks(store) == set()
    event = stored(store, "evt_hang")
    assert (event.status, event.processed_at) == (Status.PROCESSING, None)  # until the lease ends


# -- the example -------------------------------------------------------------------------------


def test_the_example_shop_over_http(empty_db_url: str) -> None:
    shop = DjangoProject(SHOP, {"SHOP_DATABASE_URL": empty_db_url})
    shop.manage("migrate")
    worker = shop.worker()
    try:
        with shop.server() as base_url:
            check_contract(base_url, empty_db_url, chunked=False)
            order = wait_for_order(f"{base_url}/orders/", "pi_fw_1")
            # A second event for the same payment: the unique payment_id keeps one order.
            event = json.dumps(checkout_event("evt_fw_2", "pi_fw_1")).encode()
            headers, body = stripe_delivery(event, "whsec_local_trial")
            assert httpx.post(
                f"{base_url}/webhooks/stripe", headers=headers, content=body
            ).is_success
            wait_for(lambda: _processed(empty_db_url, "evt_fw_2"), timeout=30, what="evt_fw_2")
            orders = httpx.get(f"{base_url}/orders/").json()["orders"]
        worker.wait_ready()
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, worker.describe()
    finally:
        worker.close()
    assert (order["amount"], order["event_id"]) == (1200, "evt_fw_1")
    assert [o["payment_id"] for o in orders] == ["pi_fw_1"]


def _processed(database_url: str, event_id: str) -> bool:
    store = Store(database_url, auto_migrate=False)
    try:
        event = store.get_event("stripe", event_id)
    finally:
        store.dispose()
    return event is not None and event.status is Status.PROCESSED
