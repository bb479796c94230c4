"""Run `hookinbox serve` as a real server on loopback for end-to-end tests."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx

ROOT = Path(__file__).resolve().parents[2]


PORT_BASE = 20_000
PORTS_PER_RANGE = 750
_next_port = itertools.count(os.getpid() % PORTS_PER_RANGE)


def free_port() -> int:
    """A free loopback port for a server, from a range of this xdist worker's own.

    Not the kernel's pick (bind to port 0): that comes from the ephemeral range, where another
    worker's server may take the same port between our check and its bind, and where every
    outgoing connection takes its local port. Each worker (gw0, gw1, ...) owns a range below
    the ephemeral range (32768 up on Linux), and walks it in turn, skipping ports in use.
    Test runs of several checkouts at once set $HOOKINBOX_TEST_PORT_SLOT (0-7) apart: each
    slot's two workers take two ranges of their own.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    slot = os.environ.get("HOOKINBOX_TEST_PORT_SLOT", "0")
    index = (int(worker) if worker.isdigit() else 0) + 2 * (int(slot) if slot.isdigit() else 0)
    base = PORT_BASE + (index % 16) * PORTS_PER_RANGE
    for _ in range(PORTS_PER_RANGE):
        port = base + next(_next_port) % PORTS_PER_RANGE
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (or lingering): the next one
            return port
    raise RuntimeError(f"no free port in {base}-{base + PORTS_PER_RANGE - 1}")


def hookinbox_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "hookinbox", *args]


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        hookinbox_command(*args),
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def running_server(app: str, database_url: str, *extra: str, workers: int = 1) -> Iterator[str]:
    """Start a server, wait until /readyz answers 200, yield its base URL, stop it."""
    port = free_port()
    command = hookinbox_command(
        "serve",
        app,
        "--database-url",
        database_url,
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
        *extra,
    )
    with serving(command, port) as base_url:
        yield base_url


@contextmanager
def serving(
    command: list[str],
    port: int,
    *,
    env: dict[str, str] | None = None,
    ready_path: str = "/readyz",
    ready_status: int = 200,
) -> Iterator[str]:
    """Run `command`, a server on `port`; yield its base URL once `ready_path` answers
    `ready_status`; stop it with SIGTERM (SIGKILL after 20 s)."""
    with serving_process(
        command, port, env=env, ready_path=ready_path, ready_status=ready_status
    ) as (_, base_url):
        yield base_url


@contextmanager
def serving_process(
    command: list[str],
    port: int,
    *,
    env: dict[str, str] | None = None,
    ready_path: str = "/readyz",
    ready_status: int = 200,
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`serving`, yielding the server's process too (to signal or kill it)."""
    # A file, not a pipe: a chatty server must never block on a pipe nobody drains.
    log = tempfile.TemporaryFile("w+")
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(process, base_url + ready_path, ready_status, log)
        yield process, base_url
    finally:
        stop(process)
        log.close()


@contextmanager
def serving_logged(
    command: list[str], port: int, *, env: dict[str, str] | None = None
) -> Iterator[tuple[str, Callable[[], str]]]:
    """`serving`, yielding the base URL and a function that reads what the server has
    logged so far (its stdout and stderr), while it runs and after it stopped."""
    log = tempfile.TemporaryFile("w+", encoding="utf-8", errors="surrogateescape")
    final: list[str] = []  # what it logged in all, once it stopped

    def written() -> str:
        if final:
            return final[0]
        log.seek(0)
        return log.read()

    process = subprocess.Popen(
        command, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=log,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(process, base_url + "/readyz", 200, log)
        yield base_url, written
    finally:
        stop(process)
        final.append(written())
        log.close()


def stop(process: subprocess.Popen[str], timeout: float = 20) -> None:
    """SIGTERM, and SIGKILL if the process has not exited after `timeout` seconds."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_ready(
    process: subprocess.Popen[str], url: str, status: int, log: IO[str], timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read()}")
        try:
            if httpx.get(url, timeout=1).status_code == status:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    log.seek(0)
    raise RuntimeError(f"server did not become ready in time:\n{log.read()}")
