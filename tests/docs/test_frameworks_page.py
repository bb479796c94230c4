"""docs/frameworks.md followed literally: each framework's section alone (no block from another
section) makes an app that takes a signed delivery and stores it once; the Django section's
files, put into a fresh `startproject` project, migrate, serve, and process into the ORM."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from hookinbox import Inbox, Status
from hookinbox._storage import Store, dialect_for_url, parse_url
from tests.docs.blocks import ROOT, FileBlock, close_inboxes, parse, run, section
from tests.docs.django_site import start_project
from tests.support.asgi import ASGIClient
from tests.support.server import free_port, serving
from tests.support.signing import stripe_delivery, stripe_event

PAGE = ROOT / "docs" / "frameworks.md"
PAGE_SECRET = "whsec_..."  # the placeholder the page's FastAPI and Flask blocks configure


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HOOKINBOX_DATABASE_URL", raising=False)
    return tmp_path


@pytest.fixture
def section_namespace() -> Iterator[Any]:
    """Runs one section of the page in a namespace of its own; closes its inboxes after."""
    namespaces: list[dict[str, Any]] = []

    def run_section(heading: str) -> dict[str, Any]:
        document = parse(PAGE)
        examples = section(document, heading)
        assert examples, f"no code under {heading!r}"
        namespaces.append(run(document, examples).namespace)
        return namespaces[-1]

    yield run_section
    for namespace in namespaces:
        close_inboxes(namespace)


def test_the_fastapi_section_alone_serves_the_mount_and_the_router(
    in_tmp: Path, section_namespace: Any
) -> None:
    namespace = section_namespace("FastAPI and Starlette")
    inbox: Inbox = namespace["inbox"]
    for app_name, event_id in (("app", "evt_mounted"), ("api", "evt_routed")):
        client = ASGIClient(namespace[app_name])
        headers, body = stripe_delivery(stripe_event(event_id), PAGE_SECRET)
        first = client.post("/webhooks/stripe", headers=headers, content=body)
        again = client.post("/webhooks/stripe", headers=headers, content=body)
        assert (first.status_code, first.json()["status"]) == (200, "accepted"), app_name
        assert (again.status_code, again.json()["status"]) == (200, "duplicate"), app_name
        stored = inbox.store.get_event("stripe", event_id)
        assert stored is not None and stored.delivery_count == 2
    forged = ASGIClient(namespace["app"]).post(
        "/webhooks/stripe", headers={"Stripe-Signature": "t=1,v1=00"}, content=b"{}"
    )
    assert forged.status_code == 401


def test_the_fastapi_lifespan_processes_while_the_app_serves(
    in_tmp: Path, section_namespace: Any
) -> None:
    """The section's lifespan, entered as uvicorn enters it: a delivery taken while it runs is
    processed by the worker in the background; leaving it stops the worker and closes the
    inbox, which then refuses deliveries (503)."""
    namespace = section_namespace("FastAPI and Starlette")
    inbox: Inbox = namespace["inbox"]
    app = namespace["app"]
    headers, body = stripe_delivery(stripe_event("evt_lifespan"), PAGE_SECRET)

    async def serve_one() -> Status:
        async with namespace["lifespan"](app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://shop") as client:
                answer = await client.post("/webhooks/stripe", headers=headers, content=body)
            assert answer.json()["status"] == "accepted"
            deadline = time.monotonic() + 30
            while (event := inbox.store.get_event("stripe", "evt_lifespan")) is None or (
                event.status in (Status.PENDING, Status.PROCESSING)
            ):
                assert time.monotonic() < deadline, "the lifespan's worker processed nothing"
                await asyncio.sleep(0.05)
            return event.status

    assert asyncio.run(serve_one()) is Status.UNHANDLED  # settled: the section has no handler
    closed = ASGIClient(app).post("/webhooks/stripe", headers=headers, content=body)
    assert closed.status_code == 503


def test_the_flask_section_alone_serves_the_blueprint(in_tmp: Path, section_namespace: Any) -> None:
    namespace = section_namespace("Flask")
    inbox: Inbox = namespace["inbox"]
    client = namespace["app"].test_client()
    headers, body = stripe_delivery(stripe_event("evt_flask_docs"), PAGE_SECRET)
    first = client.post("/webhooks/stripe", headers=headers, data=body)
    again = client.post("/webhooks/stripe", headers=headers, data=body)
    assert (first.status_code, first.json["status"]) == (200, "accepted")
    assert (again.status_code, again.json["status"]) == (200, "duplicate")
    stored = inbox.store.get_event("stripe", "evt_flask_docs")
    assert stored is not None and stored.delivery_count == 2


def test_the_orm_section_alone_writes_one_row_with_the_mark(
    in_tmp: Path, section_namespace: Any
) -> None:
    namespace = section_namespace("SQLAlchemy ORM in a handler")
    payments: Inbox = namespace["payments"]
    payment = stripe_event("evt_orm_docs", "payment_intent.succeeded")
    for _ in range(2):  # a delivery and Stripe's retry of it
        assert payments.receive("stripe", *stripe_delivery(payment, PAGE_SECRET)).ok
    assert payments.process_due() == 1
    assert payments.process_due() == 0
    with Session(payments.store.engine) as session:
        rows = session.scalars(sa.select(namespace["Payment"].id)).all()
    assert rows == ["cs_evt_orm_docs"]
    stored = payments.store.get_event("stripe", "evt_orm_docs")
    assert stored is not None and stored.status is Status.PROCESSED


DJANGO_SECRET = "whsec_django_docs"
DJANGO_FILES = {"mysite/settings.py", "mysite/urls.py", "shop/models.py", "shop/webhooks.py"}


@pytest.mark.slow
def test_the_django_section_builds_a_project_that_processes_into_the_orm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = tmp_path / "project" / "db.sqlite3"
    _follow_the_django_section(tmp_path, monkeypatch, {}, ["Django"], f"sqlite:///{database}")


@pytest.mark.slow
def test_the_mariadb_lines_put_that_project_on_mariadb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mysqlclient: str
) -> None:
    """The Django section's files, then the MariaDB section's, on a new utf8mb4 database."""
    url = parse_url(mysqlclient)
    with dialect_for_url(url).scratch_database(url) as database_url:
        server = parse_url(database_url)
        env = {
            "MARIADB_HOST": server.host or "",
            "MARIADB_PORT": str(server.port or 3306),
            "MARIADB_DATABASE": server.database or "",
            "MARIADB_USER": server.username or "",
            "MARIADB_PASSWORD": server.password or "",
        }
        _follow_the_django_section(tmp_path, monkeypatch, env, ["Django", "MariaDB"], database_url)


def _follow_the_django_section(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    extra_env: dict[str, str],
    headings: list[str],
    database_url: str,
) -> None:
    """Build the project from the files under `headings`, migrate, serve, deliver, process;
    then read the orders and the event in the database at `database_url`."""
    project = tmp_path / "project"
    project.mkdir()
    env = {**os.environ, "STRIPE_WEBHOOK_SECRET": DJANGO_SECRET, **extra_env}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("HOOKINBOX_DATABASE_URL", None)

    # The two commands the page starts from, then the page's files, written as it says.
    manage = start_project(project, env)
    document = parse(PAGE)
    examples = [example for heading in headings for example in section(document, heading)]
    files = [example.parsed for example in examples]
    assert files and all(isinstance(block, FileBlock) for block in files), "only files here"
    assert {block.path for block in files} == DJANGO_FILES
    monkeypatch.chdir(project)
    run(document, examples)

    commands = _shell_lines(document.text, "Django")
    for command in ("makemigrations shop", "migrate", "runserver", "hookinbox_worker"):
        assert f"python manage.py {command}" in commands, f"the page runs {command}"
    manage("makemigrations", "shop")
    manage("makemigrations", "--check", "--dry-run")  # nothing else pending, hookinbox's included
    manage("migrate")
    manage("check", "--fail-level", "WARNING")  # no hookinbox.W001: the SQLite options are in

    port = free_port()
    runserver = [sys.executable, str(project / "manage.py"), "runserver", f"127.0.0.1:{port}"]
    checkout = stripe_event("evt_django_docs", payment_intent="pi_docs", amount_total=4200)
    with serving(
        [*runserver, "--noreload"], port, env=env, ready_path="/webhooks/stripe", ready_status=405
    ) as url:
        replies = [
            httpx.post(f"{url}/webhooks/stripe", headers=headers, content=body, timeout=30)
            for headers, body in [stripe_delivery(checkout, DJANGO_SECRET) for _ in range(2)]
        ]
    assert [(r.status_code, r.json()["status"]) for r in replies] == [
        (200, "accepted"),
        (200, "duplicate"),
    ]

    manage("hookinbox_worker", "--until-idle")
    manage("hookinbox_worker", "--until-idle")  # a second worker run finds nothing to redo
    store = Store(database_url, auto_migrate=False)
    try:
        with store.reading() as connection:
            orders = connection.execute(sa.text("SELECT payment_id, amount FROM shop_order"))
            assert [tuple(row) for row in orders] == [("pi_docs", 4200)]
        stored = store.get_event("stripe", "evt_django_docs")
    finally:
        store.dispose()
    assert stored is not None and stored.status is Status.PROCESSED


def _shell_lines(text: str, heading: str) -> set[str]:
    """The commands (comments cut) of the ```text blocks under `heading`."""
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    commands = set()
    for block in re.findall(r"^```text\n(.*?)^```", text[start:end], re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            commands.add(line.split("#", 1)[0].strip())
    return commands
