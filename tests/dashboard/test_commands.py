"""`hookinbox serve` mounts the dashboard only with a token; `hookinbox dashboard` serves it
alone. Real servers on loopback, driven with a real HTTP client."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import APP, error_line, hookinbox, hookinbox_all
from tests.dashboard.conftest import TOKEN, csrf_of
from tests.support.server import (
    ROOT,
    free_port,
    hookinbox_command,
    run_cli,
    running_server,
    serving,
)

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`


def sign_in(client: httpx.Client) -> httpx.Response:
    csrf = csrf_of(client.get("/admin/login").text)
    return client.post("/admin/login", data={"token": TOKEN, "csrf": csrf})


def test_serve_has_no_dashboard_without_a_token(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'inbox.db'}"
    with running_server(APP, url, "--no-worker") as base, httpx.Client(base_url=base) as client:
        assert client.get("/admin/login").status_code == 404
        assert client.get("/admin/").status_code == 404


def test_serve_mounts_the_dashboard_at_admin_with_a_token(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'inbox.db'}"
    with (
        running_server(APP, url, "--no-worker", "--admin-token", TOKEN) as base,
        httpx.Client(base_url=base) as client,
    ):
        assert client.get("/admin/").headers["location"] == "/admin/login"
        assert sign_in(client).status_code == 303
        overview = client.get("/admin/")
        assert overview.status_code == 200
        assert "<h1>Overview</h1>" in overview.text
        assert client.get("/webhooks/admin/").status_code == 404
        assert client.get("/readyz").status_code == 200  # the probes are still there


def test_dashboard_command_serves_the_dashboard_alone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'inbox.db'}"
    assert hookinbox("migrate", "--database-url", url).returncode == 0
    port = free_port()
    command = hookinbox_command("dashboard", APP, "--database-url", url, "--port", str(port))
    env = {"HOOKINBOX_ADMIN_TOKEN": TOKEN}
    with (
        serving(command, port, env=env, ready_path="/admin/login") as base,
        httpx.Client(base_url=base) as client,
    ):
        assert client.get("/").headers["location"] == "/admin/"
        assert sign_in(client).status_code == 303
        assert "stripe" in client.get("/admin/").text  # the app's sources, with no events yet
        assert client.post("/webhooks/stripe", content=b"{}").status_code == 404


def test_the_dashboard_listens_before_it_prints_its_url(tmp_path: Path) -> None:
    """A reader (or a script) connects as soon as the URL is printed: the dashboard is
    stopped right then, and the connection must still be queued by the kernel, not refused
    (the docs' tutorial test met "connection refused" when the URL came before the bind)."""
    url = f"sqlite:///{tmp_path / 'inbox.db'}"
    assert hookinbox("migrate", "--database-url", url).returncode == 0
    port = free_port()
    command = hookinbox_command("dashboard", APP, "--database-url", url, "--port", str(port))
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, "HOOKINBOX_ADMIN_TOKEN": TOKEN},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        process.send_signal(signal.SIGSTOP)  # no time for a bind after the line
        assert first == f"hookinbox dashboard: http://127.0.0.1:{port}/admin/\n"
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # accepted into the backlog while the process is stopped
        process.send_signal(signal.SIGCONT)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            assert client.get("/admin/login").status_code == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0, process.stdout.read()  # Ctrl-C: a clean stop
    finally:
        process.send_signal(signal.SIGCONT)
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def test_dashboard_command_refuses_to_start_without_a_good_token(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'inbox.db'}"
    missing, short, no_database, serve_short = hookinbox_all(
        ("dashboard", APP, "--database-url", url),
        ("dashboard", APP, "--database-url", url, "--admin-token", "hunter2"),
        ("dashboard", "--admin-token", TOKEN),
        ("serve", APP, "--database-url", url, "--admin-token", "hunter2"),
    )
    bad_threshold = run_cli(
        "dashboard", APP, "--database-url", url, "--admin-token", TOKEN,
        env={"HOOKINBOX_MAX_FAILED": "lots"}, timeout=30,
    )  # fmt: skip

    assert "set HOOKINBOX_ADMIN_TOKEN or --admin-token" in error_line(missing, 2)
    assert "at least 16 characters" in error_line(short, 2)
    assert "give APP (or set HOOKINBOX_APP) or --database-url" in error_line(no_database, 2)
    assert "at least 16 characters" in error_line(serve_short, 2)
    expected = "HOOKINBOX_MAX_FAILED must be a whole number from 0 to 1000000000, got 'lots'"
    assert expected in error_line(bad_threshold, 2)
