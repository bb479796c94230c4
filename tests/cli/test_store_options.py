"""`StoreOptions` from the command line: each field a flag of `serve`, `worker` and `relay`,
and a HOOKINBOX_* variable (docs/operations.md, "Store options")."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import textwrap
import time
import typing
from pathlib import Path

import click
import httpx
import pytest

from hookinbox import Inbox, StoreOptions
from hookinbox.cli._asgi import overrides_from_environment
from hookinbox.cli._options import STORE_OPTION_FLAGS
from hookinbox.sources import Stripe
from tests.support.server import ROOT, free_port, hookinbox_command
from tests.support.signing import stripe_delivery

SECRET = "whsec_store_options"
APP = """
import dataclasses, json
from hookinbox import Inbox
from hookinbox.sources import Stripe

inbox = Inbox("sqlite:///{db}", sources=[Stripe(secret="{secret}")])


@inbox.handler("stripe", "checkout.session.completed")
def record(event, ctx):
    with open("{out}", "w") as file:  # what the process that handles it was given
        json.dump(dataclasses.asdict(inbox.settings.store_options), file)
"""


def test_every_store_option_is_a_flag_of_its_type() -> None:
    fields = {f.name: f for f in dataclasses.fields(StoreOptions)}
    hints = typing.get_type_hints(StoreOptions)
    assert [spec.field for spec in STORE_OPTION_FLAGS] == list(fields)
    for spec in STORE_OPTION_FLAGS:
        hint = hints[spec.field]
        if typing.get_origin(hint) is typing.Literal:
            assert isinstance(spec.type, click.Choice)
            assert list(spec.type.choices) == list(typing.get_args(hint))
        else:
            expected = {int: click.IntRange, float: click.FloatRange}[hint]
            assert isinstance(spec.type, expected), spec
        default = fields[spec.field].default
        spec.type.convert(str(default), None, None)  # the default itself is accepted
    documented = (ROOT / "docs" / "operations.md").read_text()
    for spec in STORE_OPTION_FLAGS:
        row = f"| `{spec.flag}` | `{spec.variable}` |"
        assert row in documented, spec.flag
        if isinstance(spec.type, click.FloatRange | click.IntRange):  # its range, in words
            line = next(line for line in documented.splitlines() if line.startswith(row))
            assert spec.type.limits.describe() in line, spec.flag  # type: ignore[attr-defined]


def test_the_server_processes_read_them_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOOKINBOX_POOL_SIZE", "3")
    monkeypatch.setenv("HOOKINBOX_SQLITE_SYNCHRONOUS", "normal")
    monkeypatch.setenv("HOOKINBOX_TCP_TIMEOUT", "2.5")
    assert overrides_from_environment().store_options == (
        ("sqlite_synchronous", "NORMAL"), ("pool_size", 3), ("tcp_timeout", 2.5),
    )  # fmt: skip


@pytest.fixture
def app(tmp_path: Path) -> tuple[Path, Path]:
    """A module `options_app` in tmp_path whose handler writes the inbox's store options."""
    out = tmp_path / "store-options.json"
    source = APP.format(db=tmp_path / "shop.db", secret=SECRET, out=out)
    (tmp_path / "options_app.py").write_text(textwrap.dedent(source))
    return tmp_path, out


def _handled(process: subprocess.Popen[bytes], out: Path, log: Path) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while not out.exists():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    time.sleep(0.2)  # the file is written whole before the handler returns
    found: dict[str, object] = json.loads(out.read_text())
    return found


def test_worker_flags_and_variables_reach_the_store(app: tuple[Path, Path]) -> None:
    directory, out = app
    checkout = {"id": "evt_1", "type": "checkout.session.completed", "created": int(time.time())}
    headers, body = stripe_delivery(checkout, SECRET, timestamp=int(time.time()))
    environment = {**os.environ, "PYTHONPATH": str(directory), "HOOKINBOX_TCP_TIMEOUT": "2.5"}
    store = subprocess.run(
        [*hookinbox_command("migrate", "options_app:inbox")], cwd=directory, env=environment,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert store.returncode == 0, store.stderr
    sender = Inbox(f"sqlite:///{directory / 'shop.db'}", sources=[Stripe(secret=SECRET)])
    assert sender.receive("stripe", headers, body).ok
    sender.close()
    log = directory / "worker.log"
    with log.open("w") as written:
        process = subprocess.Popen(
            hookinbox_command(
                "worker", "options_app:inbox", "--pool-size", "3", "--sqlite-synchronous",
                "normal", "--busy-timeout", "7",
            ),
            cwd=directory, env=environment, stdout=written, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            options = _handled(process, out, log)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
    assert options == {
        **{f.name: f.default for f in dataclasses.fields(StoreOptions)},
        "pool_size": 3, "sqlite_synchronous": "NORMAL", "busy_timeout": 7.0, "tcp_timeout": 2.5,
    }  # fmt: skip


def test_serve_hands_them_to_its_worker(app: tuple[Path, Path]) -> None:
    directory, out = app
    port = free_port()
    log = directory / "serve.log"
    environment = {**os.environ, "PYTHONPATH": str(directory), "HOOKINBOX_MAX_OVERFLOW": "4"}
    with log.open("w") as written:
        process = subprocess.Popen(
            hookinbox_command(
                "serve", "options_app:inbox", "--port", str(port), "--connect-timeout", "3",
            ),
            cwd=directory, env=environment, stdout=written, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            checkout = {
                "id": "evt_2", "type": "checkout.session.completed", "created": int(time.time()),
            }  # fmt: skip
            headers, body = stripe_delivery(checkout, SECRET, timestamp=int(time.time()))
            deadline = time.monotonic() + 60
            while True:
                try:
                    answer = httpx.post(
                        f"http://127.0.0.1:{port}/webhooks/stripe", headers=headers,
                        content=body, timeout=5,
                    )  # fmt: skip
                    break
                except httpx.TransportError:
                    assert process.poll() is None and time.monotonic() < deadline, log.read_text()
                    time.sleep(0.2)
            assert answer.status_code == 200, answer.text
            options = _handled(process, out, log)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
    assert (options["max_overflow"], options["connect_timeout"]) == (4, 3.0)
