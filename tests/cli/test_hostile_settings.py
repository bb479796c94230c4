"""Hostile HOOKINBOX_* values against the real processes (issue 45, item 4).

`HOOKINBOX_LEASE_SECONDS=nan` started a worker that processed nothing, `POLL_INTERVAL=nan` one
that spun (8 CPU-seconds in 8 s), `GRACE_PERIOD=nan` one that dropped its drain on SIGTERM,
`HEARTBEAT_INTERVAL=nan` one whose heartbeat thread died with a traceback; `BUSY_TIMEOUT=nan`
exited 1 with "unexpected ValueError"; a garbage `HOOKINBOX_HOST` exited 1, as if the machine
had failed. Each is now one `error:` line and exit 2, before the database is opened.

The walk over every option of every command, in process, is tests/test_setting_ranges.py;
these few runs show the processes themselves stop at once.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.server import ROOT, hookinbox_command

APP = "tests.apps.orders:inbox"
WAIT = 30.0
"""Seconds a refused start may take (an interpreter and click on a loaded machine); a process
still running then was not refused: it is killed, and the test fails saying so."""


def started(args: list[str], env: dict[str, str]) -> tuple[int | None, str, float]:
    """(exit code, or None if still running after `WAIT`; stderr; seconds it ran)."""
    begun = time.monotonic()
    process = subprocess.Popen(
        hookinbox_command(*args), cwd=ROOT, env={**os.environ, **env},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _, stderr = process.communicate(timeout=WAIT)
        return process.returncode, stderr, time.monotonic() - begun
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
        return None, stderr, time.monotonic() - begun


def refused_in_one_line(outcome: tuple[int | None, str, float], *named: str) -> str:
    code, stderr, seconds = outcome
    assert code is not None, f"still running after {seconds:.0f} s: {stderr[-500:]}"
    assert code == 2, (code, stderr)
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    for text in named:
        assert text in lines[0], (text, lines[0])
    return lines[0]


def without_hookinbox_variables() -> dict[str, str]:
    return {name: "" for name in os.environ if name.startswith("HOOKINBOX_") and "TEST" not in name}


WORKER_VARIABLES = [
    ("HOOKINBOX_LEASE_SECONDS", "nan"),
    ("HOOKINBOX_POLL_INTERVAL", "nan"),
    ("HOOKINBOX_GRACE_PERIOD", "nan"),
    ("HOOKINBOX_HEARTBEAT_INTERVAL", "nan"),
    ("HOOKINBOX_BUSY_TIMEOUT", "nan"),
    ("HOOKINBOX_TCP_TIMEOUT", "inf"),
]
"""The issue's cases (each variable with every hostile value is walked in process)."""


def test_the_worker_refuses_hostile_variables_before_it_opens_the_database(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    base = without_hookinbox_variables()
    command = ["worker", APP, "--database-url", url]
    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(
            lambda case: started(command, {**base, case[0]: case[1]}), WORKER_VARIABLES
        ))  # fmt: skip
    for (variable, _), outcome in zip(WORKER_VARIABLES, outcomes, strict=True):
        flag = "--" + variable.removeprefix("HOOKINBOX_").lower().replace("_", "-")
        refused_in_one_line(outcome, flag, variable)
    assert not (tmp_path / "shop.db").exists()


def test_a_garbage_host_is_a_usage_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    base = {**without_hookinbox_variables(), "HOOKINBOX_PORT": "0"}
    hosts = ["no such host!", "1.2.3.4.5"]  # the others: tests/test_setting_ranges.py
    try:  # a name no resolver knows (RFC 2606), where this machine's resolver says so
        socket.getaddrinfo("hookinbox-test.invalid", 0)
    except socket.gaierror as error:
        if error.errno == socket.EAI_NONAME:
            hosts.append("hookinbox-test.invalid")
    command = ["serve", APP, "--database-url", url]
    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(
            lambda host: started(command, {**base, "HOOKINBOX_HOST": host}), hosts
        ))  # fmt: skip
    for host, outcome in zip(hosts, outcomes, strict=True):
        line = refused_in_one_line(outcome)
        assert "HOOKINBOX_HOST" in line or host in line, (host, line)
    assert not (tmp_path / "shop.db").exists()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("HOOKINBOX_POLL_INTERVAL", "nan"),
        ("HOOKINBOX_RECONCILE_EVERY", "-1h"),
    ],
)
def test_serve_refuses_what_its_worker_would_read(
    tmp_path: Path, variable: str, value: str
) -> None:
    """Serve takes no --poll-interval, but its worker reads HOOKINBOX_POLL_INTERVAL: checked
    by serve at start, not by a worker that spun or exited 2 in serve's restart loop."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    env = {**without_hookinbox_variables(), "HOOKINBOX_PORT": "0", variable: value}
    outcome = started(["serve", APP, "--database-url", url], env)
    refused_in_one_line(outcome, variable)
    assert not (tmp_path / "shop.db").exists()
