"""Structured logs: one JSON object per line, with the event's identity and outcome."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hookinbox import Status
from hookinbox._logging import JSONFormatter
from tests.apps import orders as orders_app
from tests.processing.conftest import checkout
from tests.support.server import ROOT, hookinbox_command
from tests.support.signing import stripe_delivery


@pytest.mark.slow
def test_the_worker_logs_each_attempt_as_json(db_url: str) -> None:
    orders_app.create_tables(db_url)
    inbox = orders_app.build(db_url)
    headers, body = stripe_delivery(checkout(1), orders_app.STRIPE_SECRET)
    inbox.receive("stripe", headers, body)
    worker = subprocess.Popen(
        hookinbox_command(
            "worker", "tests.apps.orders:inbox", "--database-url", db_url, "--log-format", "json"
        ),
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        event = inbox.store.get_event("stripe", "evt_1")
        if event is not None and event.status is Status.PROCESSED:
            break
        time.sleep(0.1)
    time.sleep(0.5)  # past the first poll, so the worker has installed its signal handlers
    worker.send_signal(signal.SIGTERM)
    _, stderr = worker.communicate(timeout=30)
    inbox.close()
    assert worker.returncode == 0
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    attempts = [line for line in lines if line.get("event_id") == "evt_1"]
    assert len(attempts) == 1
    [attempt] = attempts
    assert attempt["logger"] == "hookinbox.worker"
    assert attempt["source"] == "stripe"
    assert attempt["event_type"] == "checkout.session.completed"
    assert attempt["outcome"] == "processed"
    assert attempt["attempt"] == 1
    assert isinstance(attempt["latency_ms"], float)
    assert attempt["level"] == "info"
    assert "whsec" not in stderr  # no secrets in logs


def test_the_formatter_keeps_exceptions_and_skips_absent_fields() -> None:
    try:
        raise ValueError("broken")
    except ValueError:
        record = logging.LogRecord(
            "hookinbox.x", logging.ERROR, __file__, 1, "failed %s", ("x",), sys.exc_info()
        )
    record.source = "stripe"
    document = json.loads(JSONFormatter().format(record))
    assert document["message"] == "failed x"
    assert document["source"] == "stripe"
    assert "event_id" not in document
    assert "ValueError: broken" in document["exception"]


def test_a_lone_surrogate_in_a_log_record_is_written_escaped(tmp_path: Path) -> None:
    """Event ids and error messages are untrusted: a UTF-8 log file must still get the line."""
    from hookinbox._logging import logger

    path = tmp_path / "hookinbox.log"
    handler = logging.FileHandler(path, encoding="utf-8", errors="strict")
    log = logger("hookinbox.worker")
    log.addHandler(handler)
    try:
        try:
            raise ValueError("bad \ud800 note")
        except ValueError:
            log.warning("stripe %s failed: %s", "evt_\udfff", "x\x00y", exc_info=True)
    finally:
        log.removeHandler(handler)
        handler.close()
    written = path.read_text(encoding="utf-8")
    assert "stripe evt_\\udfff failed: x\\x00y" in written
    assert "ValueError: bad \\ud800 note" in written
