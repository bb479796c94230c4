"""Secrets, signatures and raw bodies never reach logs, answers, metrics or the CLI's lists.

What it proves: a real `hookinbox serve` (its HTTP process and its worker), logging at debug
level to a file, is sent every kind of delivery — accepted, duplicate, forged, malformed JSON,
too large, to an unknown source, one the database refuses (a trigger raising), one whose
handler fails — each carrying unique markers: the Stripe secret holds one, every body holds a
card-number-like one, and the signature header values are markers too. None of them appears in
the server's log, in any HTTP answer, in `/metrics`, in `hookinbox status` or in `hookinbox
events list` (tables and JSON); in `hookinbox events show` the secret never appears and the
failed event's last error quotes nothing of the body (the body and stored headers are shown
there by design). An event type that is a marker never reaches `/metrics` (it is folded into
`other`, see test_metric_labels.py) while the log names it (types and ids are identifiers
the log lines exist to show).

How: markers are random per run; the secret reaches the server through the environment
(tests/apps/guarded.py); the CLI runs as subprocesses against the same database. Positive
controls (the log has a line per outcome, the stored body holds its marker, the last error
names the failure) show that each channel was really looked at.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from hookinbox._storage._schema import events
from hookinbox.sources import Stripe
from hookinbox.testing import sign
from tests.apps import guarded
from tests.reliability._report import Trial, record
from tests.support.server import ROOT, free_port, hookinbox_command, stop
from tests.support.workers import opened_store, wait_for

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

APP = "tests.apps.guarded:inbox"
MAX_BODY = 1024 * 1024
CLI_WIDTH = {"COLUMNS": "400"}  # rich would fold long cells across lines, hiding a marker


@contextmanager
def logging_server(database_url: str, log_path: Path, secret: str) -> Iterator[str]:
    """`hookinbox serve` (HTTP and worker) at debug level, its whole output in `log_path`."""
    port = free_port()
    command = hookinbox_command(
        "serve", APP, "--database-url", database_url, "--port", str(port),
        "--log-level", "debug",
    )  # fmt: skip
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**os.environ, guarded.SECRET_ENV: secret},
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        base_url = f"http://127.0.0.1:{port}"
        try:
            wait_for(
                lambda: _ready(base_url),
                timeout=30,
                what="the server to answer /readyz",
                check=lambda: _alive(process, log_path),
            )
            yield base_url
        finally:
            stop(process)


def _ready(base_url: str) -> bool:
    try:
        return httpx.get(base_url + "/readyz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def _alive(process: subprocess.Popen[str], log_path: Path) -> None:
    if process.poll() is not None:
        raise AssertionError(f"server exited {process.returncode}: {log_path.read_text()}")


def card_marker() -> str:
    """A card-number-like marker, unique to this run: 4 then 15 random digits, grouped."""
    digits = "4" + "".join(secrets.choice("0123456789") for _ in range(15))
    return " ".join(digits[i : i + 4] for i in range(0, 16, 4))


def stripe_header(secret: str, body: bytes) -> tuple[str, str]:
    """The Stripe-Signature value for `body`, and its v1 digest (a marker of its own)."""
    header = sign(Stripe(secret=secret), body)[0]["Stripe-Signature"]
    return header, header.partition(",v1=")[2]


def stripe_body(event_id: str, event_type: str, card: str, **extra: Any) -> bytes:
    obj = {"id": f"ch_{event_id}", "card_number": card, **extra}
    event = {
        "id": event_id,
        "type": event_type,
        "created": int(time.time()),
        "data": {"object": obj},
    }
    return json.dumps(event).encode()


def install_refusing_trigger(database_url: str) -> None:
    """The database refuses events whose id starts `evt_refused`: a write that fails for a
    reason other than unavailability, the path that logs the driver's error."""
    engine = sa.create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as connection:
        if engine.dialect.name == "sqlite":
            connection.exec_driver_sql(
                "CREATE TRIGGER refuse_marked BEFORE INSERT ON hookinbox_events "
                "WHEN substr(NEW.event_id, 1, 11) = 'evt_refused' "
                "BEGIN SELECT RAISE(ABORT, 'refused by a test trigger'); END"
            )
        else:
            connection.exec_driver_sql(
                "CREATE FUNCTION refuse_marked() RETURNS trigger AS $$ BEGIN "
                "IF substr(NEW.event_id, 1, 11) = 'evt_refused' THEN "
                "RAISE EXCEPTION 'refused by a test trigger'; END IF; RETURN NEW; END $$ "
                "LANGUAGE plpgsql"
            )
            connection.exec_driver_sql(
                "CREATE TRIGGER refuse_marked BEFORE INSERT ON hookinbox_events "
                "FOR EACH ROW EXECUTE FUNCTION refuse_marked()"
            )
    engine.dispose()


class Sender:
    """Sends deliveries over HTTP and keeps every answer, and the markers each carried."""

    def __init__(self, client: httpx.Client, secret: str) -> None:
        self.client = client
        self.secret = secret
        self.answers: list[str] = []
        self.statuses: dict[str, list[int]] = {}
        self.markers: dict[str, str] = {}

    def post(self, label: str, path: str, headers: dict[str, str], body: bytes) -> int:
        response = self.client.post(path, headers=headers, content=body)
        self.answers.append(response.text)
        self.answers.append(json.dumps(dict(response.headers)))
        self.statuses.setdefault(label, []).append(response.status_code)
        return response.status_code

    def signed(self, label: str, event_id: str, event_type: str, *, copies: int = 1) -> None:
        card = self.markers[f"{label} card"] = card_marker()
        body = stripe_body(event_id, event_type, card)
        header, digest = stripe_header(self.secret, body)
        self.markers[f"{label} signature"] = digest
        for _ in range(copies):
            self.post(label, "/webhooks/stripe", {"Stripe-Signature": header}, body)


def send_every_kind(sender: Sender) -> None:
    sender.signed("accepted", "evt_paid", "invoice.paid", copies=2)  # accepted, then duplicate
    sender.signed("failing handler", "evt_charge_failed", "charge.failed")
    sender.signed("refused by the database", "evt_refused_1", "invoice.paid")
    type_marker = sender.markers["type (metrics only)"] = f"promo.{secrets.token_hex(8)}"
    sender.signed("unhandled type", "evt_promo", type_marker)

    card = sender.markers["forged card"] = card_marker()
    forged = secrets.token_hex(32)
    sender.markers["forged signature"] = forged
    body = stripe_body("evt_forged", "invoice.paid", card)
    header = f"t={int(time.time())},v1={forged}"
    sender.post("forged", "/webhooks/stripe", {"Stripe-Signature": header}, body)

    card = sender.markers["malformed card"] = card_marker()
    body = b'{"id": "evt_malformed", "type": "invoice.paid", "card_number": "' + card.encode()
    header, digest = stripe_header(sender.secret, body)
    sender.markers["malformed signature"] = digest
    sender.post("malformed JSON", "/webhooks/stripe", {"Stripe-Signature": header}, body)

    card = sender.markers["too large card"] = card_marker()
    body = stripe_body("evt_large", "invoice.paid", card, pad="x" * MAX_BODY)
    header, digest = stripe_header(sender.secret, body)
    sender.markers["too large signature"] = digest
    sender.post("too large", "/webhooks/stripe", {"Stripe-Signature": header}, body)

    card = sender.markers["unknown source card"] = card_marker()
    body = stripe_body("evt_nowhere", "invoice.paid", card)
    header, digest = stripe_header(sender.secret, body)
    sender.markers["unknown source signature"] = digest
    sender.post("unknown source", "/webhooks/nowhere", {"Stripe-Signature": header}, body)


OUTCOMES_LOGGED = ("accepted", "duplicate", "invalid_signature", "bad_request", "too_large",
                   "unknown_source")  # fmt: skip
EXPECTED_STATUSES = {
    "accepted": [200, 200],
    "failing handler": [200],
    "refused by the database": [500],
    "unhandled type": [200],
    "forged": [401],
    "malformed JSON": [400],
    "too large": [413],
    "unknown source": [404],
}


def run_cli_outputs(database_url: str) -> dict[str, str]:
    """The operator commands' outputs, run concurrently (each is a Python start-up)."""
    commands = {
        "status": ("status",),
        "events list": ("events", "list"),
        "events list --json": ("events", "list", "--json"),
        "events show --json": ("events", "show", "stripe", "evt_charge_failed", "--json"),
    }
    processes = {
        name: subprocess.Popen(
            hookinbox_command(*args, "--database-url", database_url),
            cwd=ROOT,
            env={**os.environ, **CLI_WIDTH},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, args in commands.items()
    }
    outputs = {}
    for name, process in processes.items():
        output, _ = process.communicate(timeout=60)
        assert process.returncode == 0, f"{name} exited {process.returncode}: {output}"
        outputs[name] = output
    return outputs


def leaks(channels: dict[str, str], markers: dict[str, str]) -> list[str]:
    return [
        f"{marker_name} ({marker!r}) in {channel}"
        for channel, text in channels.items()
        for marker_name, marker in markers.items()
        if marker in text
    ]


def test_no_secret_signature_or_body_in_logs_answers_metrics_or_cli(
    db_url: str, backend: str, tmp_path: Path
) -> None:
    secret_marker = f"whsec_{secrets.token_hex(12)}"
    log_path = tmp_path / "server.log"
    install_refusing_trigger(db_url)
    with logging_server(db_url, log_path, secret_marker) as base_url:
        with httpx.Client(base_url=base_url, timeout=30) as client:
            sender = Sender(client, secret_marker)
            send_every_kind(sender)
            with opened_store(db_url) as store:

                def settled() -> bool:
                    found = store.get_event("stripe", "evt_charge_failed")
                    paid = store.get_event("stripe", "evt_paid")
                    return (
                        found is not None
                        and found.status.value == "failed"
                        and paid is not None
                        and paid.status.value == "processed"
                    )

                wait_for(settled, timeout=30, what="the worker to fail evt_charge_failed")
                with store.reading() as connection:
                    stored = set(connection.execute(sa.select(events.c.event_id)).scalars())
            metrics = client.get("/metrics").text
        cli = run_cli_outputs(db_url)
    log = log_path.read_text()

    assert sender.statuses == EXPECTED_STATUSES
    assert stored == {"evt_paid", "evt_charge_failed", "evt_promo"}  # nothing else was written
    # Positive controls: each channel holds what it should, so its silence means something.
    for outcome in (*OUTCOMES_LOGGED, "unexpected error storing", "charge.failed", "failed"):
        assert outcome in log, f"the log has no {outcome!r} line:\n{log}"
    assert "hookinbox_deliveries_total" in metrics
    assert "evt_charge_failed" in cli["events list"] and "failed" in cli["events list"]
    shown = json.loads(cli["events show --json"])
    assert sender.markers["failing handler card"] in json.dumps(shown["body"])  # stored as sent
    assert "bind parameter" in shown["last_error"]  # the failure is described

    secret_markers = {
        "secret": secret_marker,
        **{name: value for name, value in sender.markers.items() if "type" not in name},
    }
    # `events show` prints the body and the stored headers (Stripe-Signature) by design.
    shown_fields = {k: v for k, v in shown.items() if k not in ("body", "headers")}
    channels = {
        "the server log": log,
        "the HTTP answers": "\n".join(sender.answers),
        "/metrics": metrics,
        **{f"`hookinbox {name}`": text for name, text in cli.items() if "show" not in name},
        "`events show` but its body and headers": json.dumps(shown_fields, default=str),
    }
    found = leaks(channels, secret_markers)
    found += leaks({"`events show`": cli["events show --json"]}, {"secret": secret_marker})
    found += leaks({"/metrics": metrics}, {"event type": sender.markers["type (metrics only)"]})
    assert found == [], "\n".join(found)

    deliveries = sum(len(s) for s in sender.statuses.values())
    forged_accepted = sum(1 for s in sender.statuses["forged"] if s < 300)
    record(
        Trial(
            fault="markers in secret, bodies, signatures: logs, answers, /metrics, CLI",
            backend=backend,
            deliveries=deliveries,
            lost=len({"evt_paid", "evt_charge_failed", "evt_promo"} - stored),
            doubled=forged_accepted,
            detail=(
                f"{len(secret_markers)} markers x {len(channels)} channels "
                f"({len(log.splitlines())} debug log lines): 0 leaks; statuses "
                + ", ".join(f"{k} {v}" for k, v in sender.statuses.items())
            ),
        )
    )
