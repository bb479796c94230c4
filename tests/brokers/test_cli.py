"""`hookinbox consume`: bad options are one line and exit 2 before anything is touched; a
run stores a queue's messages and exits 0 on SIGTERM with nothing left unacked."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hookinbox.cli._main import main
from tests.brokers.brokers import SOURCE, make_inbox, order, rabbit_queue, stored

APP = """
import os

from hookinbox import Inbox
from hookinbox.brokers import BrokerSource
from hookinbox.sources import HMACSource

inbox = Inbox(os.environ["APP_DATABASE_URL"])
inbox.add_source(BrokerSource("orders", key="payload:id"))
inbox.add_source(HMACSource(name="hooks", secret="s", signature_header="x-sig"))
"""


def one_error_line(args: list[str], env: dict[str, str] | None = None) -> str:
    result = CliRunner().invoke(main, ["consume", *args], env=env)
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "brokerapp.py").write_text(APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APP_DATABASE_URL", f"sqlite:///{tmp_path / 'in.db'}")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--source", "orders"], "give one broker"),
        (["--source", "orders", "--rabbitmq", "amqp://h/", "--jetstream", "nats://h"],
         "one broker"),
        (["--source", "orders", "--rabbitmq", "amqp://h/"], "--rabbitmq needs --queue"),
        (["--source", "orders", "--rabbitmq", "amqp://h/", "--queue", "q", "--stream", "s"],
         "--stream apply to --jetstream"),
        (["--source", "orders", "--jetstream", "nats://h", "--stream", "s"],
         "--jetstream needs --stream and --consumer"),
        (["--source", "orders", "--jetstream", "nats://h", "--queue", "q"], "--queue applies"),
        (["--source", "orders", "--rabbitmq", "http://u:secret@h/",
          "--queue", "q"], "'http://...'"),
    ],
)  # fmt: skip
def test_bad_options_are_one_line_and_exit_2(app: Path, args: list[str], said: str) -> None:
    line = one_error_line(["brokerapp:inbox", *args])
    assert said in line
    assert "secret" not in line  # a URL's password is never echoed
    assert not (app / "in.db").exists()


def test_a_source_that_is_not_a_broker_source_is_refused(app: Path) -> None:
    base = ["brokerapp:inbox", "--rabbitmq", "amqp://127.0.0.1:1/", "--queue", "q"]
    assert "not a BrokerSource" in one_error_line([*base, "--source", "hooks"])
    assert "no source named 'nope'" in one_error_line([*base, "--source", "nope"])
    assert not (app / "in.db").exists()  # refused before the database is opened


@pytest.mark.slow
def test_consume_stores_the_queue_and_stops_on_sigterm(rabbitmq_url: str, app: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")]),
    }

    async def scenario() -> None:
        async with rabbit_queue(rabbitmq_url) as queue:
            for n in range(5):
                await queue.publish(order(n))
            command = [
                *(sys.executable, "-m", "hookinbox", "consume", "brokerapp:inbox"),
                *("--source", SOURCE, "--rabbitmq", rabbitmq_url, "--queue", queue.name),
            ]
            child = subprocess.Popen(command, cwd=app, env=env, stderr=subprocess.PIPE)
            try:
                inbox = make_inbox(os.environ["APP_DATABASE_URL"])
                try:
                    deadline = time.monotonic() + 30
                    while len(stored(inbox)) < 5 and time.monotonic() < deadline:
                        await asyncio.sleep(0.1)
                    assert len(stored(inbox)) == 5
                finally:
                    inbox.close()
                child.send_signal(signal.SIGTERM)
                _, errors = await asyncio.to_thread(child.communicate, timeout=30)
            finally:
                if child.poll() is None:
                    child.kill()
            assert child.returncode == 0, errors.decode()[-2000:]
            assert "stopped consuming" in errors.decode()
            assert await queue.count() == 0

    asyncio.run(scenario())
