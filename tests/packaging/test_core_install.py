"""`pip install hookinbox` (the core, no extra) in a fresh environment: what it brings, that an
inbox works with it, and that every feature left to an extra says which one in one line.

The wheel is built from this tree and installed with pip from the package index (through pip's
cache), as a user would; about a minute. Sizes are measured as `bench/footprint.py` measures
them (`bench/_install.py`).
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bench._install import Footprint, build_wheel, footprint, fresh_environment, normalise
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
MAX_DEPENDENCIES = 10
MAX_MEGABYTES = 40.0
EXTRAS_ONLY = {
    "uvicorn", "uvloop", "httptools", "rich", "pygments", "starlette", "jinja2", "itsdangerous",
    "httpx", "httpcore", "cryptography", "cffi", "psycopg", "psycopg-binary", "prometheus-client",
    "redis", "fastapi", "flask", "django", "watchfiles", "websockets", "msgspec",
}  # fmt: skip
APP = """
import sqlalchemy as sa

from hookinbox import Inbox
from hookinbox.sources import Stripe

SECRET = "whsec_core_install"
inbox = Inbox("sqlite:///core.db")
inbox.add_source(Stripe(secret=SECRET))
orders = sa.Table("orders", sa.MetaData(), sa.Column("session", sa.String, primary_key=True))


@inbox.handler("stripe", "checkout.session.completed")
def on_checkout(event, ctx):
    ctx.db.execute(orders.insert().values(session=event.payload["data"]["object"]["id"]))
"""

RECEIVE = """
import json, time

import sqlalchemy as sa

from app import inbox, orders
from hookinbox.testing import sign

# Signed as Stripe signs, by the test kit the core install carries (no pytest, no stripe).
headers, body = sign(inbox.sources["stripe"], {
    "id": "evt_1", "type": "checkout.session.completed",
    "created": int(time.time()), "data": {"object": {"id": "cs_1"}},
})
stamp = int(time.time())

inbox.migrate()
with inbox.store.transaction() as connection:
    orders.metadata.create_all(connection)
first = inbox.receive("stripe", headers, body)
again = inbox.receive("stripe", headers, body)
forged = inbox.receive("stripe", {"Stripe-Signature": f"t={stamp},v1={'0' * 64}"}, body)
processed = inbox.process_due()
with inbox.store.reading() as connection:
    stored = connection.execute(sa.select(orders.c.session)).scalars().all()
print(json.dumps({
    "answers": [[r.status_code, r.body.get("status")] for r in (first, again, forged)],
    "processed": processed,
    "orders": stored,
    "status": inbox.store.get_event("stripe", "evt_1").status.value,
}))
"""

MISSING = """
import anyio

from hookinbox import MissingExtra


def attempt(what, action):
    try:
        action()
    except MissingExtra as error:
        assert isinstance(error, ImportError)
        print(f"{what}: {error}")
    else:
        print(f"{what}: no error")


def paypal():
    from hookinbox.sources import PayPal


def discord():
    from hookinbox.sources import Discord  # importable: cryptography loads when one is built

    Discord(public_key="00" * 32)


def http_destination():
    from hookinbox.outbox import HTTPDestination

    HTTPDestination("email", url="http://127.0.0.1:9/send")


def postgres():
    from hookinbox import Inbox

    Inbox("postgresql://shop@127.0.0.1:9/shop").migrate()  # refused before any connection


async def metrics():
    from app import inbox

    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/metrics", "root_path": "",
             "headers": [], "query_string": b""}
    await inbox.asgi()(scope, receive, send)
    body = sent[1]["body"].decode()
    print(f"/metrics: {sent[0]['status']}, {len(body.splitlines())} line: {body.strip()}")


def claims():
    import hookinbox.claims


def dashboard():
    from hookinbox.dashboard import dashboard_app


def simulator():
    import hookinbox.simulate


attempt("hookinbox.claims", claims)
attempt("hookinbox.dashboard", dashboard)
attempt("hookinbox.simulate", simulator)
attempt("PayPal source", paypal)
attempt("Discord source", discord)
attempt("HTTPDestination", http_destination)
attempt("postgresql URL", postgres)
anyio.run(metrics)
"""


@dataclass
class Core:
    python: Path
    footprint: Footprint
    workdir: Path

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.python), *args],
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={"PATH": str(self.python.parent), "HOME": str(self.workdir)},
        )

    def hookinbox(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run("-m", "hookinbox", *args)


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Core]:
    base = tmp_path_factory.mktemp("core-install")
    wheel = build_wheel(ROOT, base / "wheel")
    python = fresh_environment(base / "venv", str(wheel))
    workdir = base / "app"
    workdir.mkdir()
    (workdir / "app.py").write_text(textwrap.dedent(APP))
    yield Core(python, footprint(python), workdir)


def test_the_core_is_small_and_nothing_but_the_core(core: Core) -> None:
    installed = {d.name: d for d in core.footprint.distributions}
    hookinbox = installed["hookinbox"]
    core_requirements = [Requirement(text) for text in hookinbox.requires if "extra ==" not in text]
    assert {normalise(r.name) for r in core_requirements} == {
        "sqlalchemy", "alembic", "click", "anyio"
    }  # fmt: skip
    # Everything installed is hookinbox, a core requirement, or one of theirs: no extra got in.
    needed = {"hookinbox"}
    pending = [r for r in core_requirements if r.marker is None or r.marker.evaluate()]
    while pending:
        name = normalise(pending.pop().name)
        if name in needed:
            continue
        needed.add(name)
        for text in installed[name].requires:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement)
    assert set(installed) == needed
    assert not set(installed) & EXTRAS_ONLY
    assert len(core.footprint.dependencies) <= MAX_DEPENDENCIES, core.footprint.dependencies
    assert core.footprint.megabytes <= MAX_MEGABYTES, core.footprint.megabytes


def test_the_core_verifies_stores_and_processes_a_signed_delivery(core: Core) -> None:
    (core.workdir / "receive.py").write_text(textwrap.dedent(RECEIVE))

    result = core.run("receive.py")

    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["answers"] == [[200, "accepted"], [200, "duplicate"], [401, "rejected"]]
    assert (outcome["processed"], outcome["orders"]) == (1, ["cs_1"])
    assert outcome["status"] == "processed"


def test_the_core_commands_run(core: Core) -> None:
    shown = core.hookinbox("--help")
    migrated = core.hookinbox("migrate", "app:inbox")
    status = core.hookinbox("status", "app:inbox")
    listed = core.hookinbox("events", "list", "app:inbox", "--json")

    assert shown.returncode == 0 and "serve" in shown.stdout
    assert migrated.returncode == 0, migrated.stderr
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[1].split()[0] == "source"  # plain columns, no rich
    assert listed.returncode == 0, listed.stderr


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["serve", "app:inbox"], "server"),
        (["dashboard", "app:inbox", "--admin-token", "a-token-long-enough-0123"], "dashboard"),
        (["simulate", "--provider", "stripe", "--secret", "s", "--target", "http://x"], "simulate"),
        (["demo"], "simulate,server"),
        (["worker", "app:inbox", "--metrics-port", "9464"], "metrics"),
    ],
)
def test_each_command_needing_an_extra_says_which_in_one_line(
    core: Core, args: list[str], extra: str
) -> None:
    result = core.hookinbox(*args)

    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert lines[0].endswith(f"pip install 'hookinbox[{extra}]'"), lines[0]


def test_each_library_feature_needing_an_extra_says_which(core: Core) -> None:
    (core.workdir / "missing.py").write_text(textwrap.dedent(MISSING))

    result = core.run("missing.py")

    assert result.returncode == 0, result.stderr
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert lines["hookinbox.claims"] == (
        "hookinbox.claims needs the Redis client (redis): pip install 'hookinbox[redis]'"
    )
    assert lines["hookinbox.dashboard"] == (
        "hookinbox.dashboard needs the dashboard's web stack (starlette, jinja2, itsdangerous, "
        "uvicorn): pip install 'hookinbox[dashboard]'"
    )
    assert lines["hookinbox.simulate"] == (
        "hookinbox.simulate needs the simulator (httpx, rich): pip install 'hookinbox[simulate]'"
    )
    assert lines["PayPal source"] == (
        "hookinbox.sources.PayPal needs PayPal's certificate checks (cryptography, httpx): "
        "pip install 'hookinbox[paypal]'"
    )
    assert lines["Discord source"] == (
        "hookinbox.sources.Discord needs public-key signature checks (cryptography): "
        "pip install 'hookinbox[crypto]'"
    )
    assert lines["HTTPDestination"] == (
        "HTTPDestination needs an HTTP client (httpx): pip install 'hookinbox[http]'"
    )
    assert lines["postgresql URL"] == (
        "a postgresql:// database URL needs the PostgreSQL driver (psycopg): "
        "pip install 'hookinbox[postgres]'"
    )
    assert lines["/metrics"] == (
        "501, 1 line: /metrics needs the Prometheus client (prometheus_client): "
        "pip install 'hookinbox[metrics]'"
    )
