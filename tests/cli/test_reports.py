"""What the long-running commands print where no one watches a terminal: `demo` and `simulate`
in a pipe or a CI log print plain columns (docs/cli.md, "Output"), and a `serve` stopped
with Ctrl-C before any request ends without a warning."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from tests.support.server import ROOT, free_port, hookinbox_command, run_cli

BOX = set("│┃━─┏┓┗┛╭╮╰╯┡┩┳┻╇")


def test_demo_off_a_terminal_prints_plain_columns() -> None:
    result = run_cli("demo", "--events", "40", "--seed", "7", timeout=240)

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    output = result.stdout
    assert not set(output) & BOX, output
    assert "\x1b[" not in output + result.stderr
    lines = output.splitlines()
    assert lines[0] == "== hookinbox demo =="
    assert all(len(line) <= 100 for line in lines[1:5])  # the intro, broken between words
    # The title's URL whole on its line; then a header and a row per kind of delivery.
    assert re.search(r"^Deliveries to http://127\.0\.0\.1:\d+/webhooks/stripe:$", output, re.M)
    header = lines[lines.index(next(x for x in lines if x.startswith("Deliveries to"))) + 1]
    assert re.split(r"\s{2,}", header)[:3] == ["kind", "sent", "200"]
    assert re.search(r"^total\s+\d+\s+\d+", output, re.M)
    assert re.search(r"^Exactly-once check:\n(.*\n)*result\s+ok$", output, re.M)
    assert "exactly-once held: every acknowledged event applied once" in output


class _Refusing(BaseHTTPRequestHandler):
    """A receiver that answers every delivery 400: no event is ever acknowledged."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(400)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_simulate_off_a_terminal_prints_plain_columns() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    target = f"http://127.0.0.1:{server.server_port}/webhooks/stripe"
    try:
        result = run_cli(
            "simulate", "--provider", "stripe", "--secret", "whsec_x", "--events", "3",
            "--target", target, "--seed", "1", "--retry-compression", "100000", timeout=120,
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()

    assert result.returncode == 1
    assert not set(result.stdout) & BOX, result.stdout
    assert f"Deliveries to {target}:" in result.stdout.splitlines()
    assert re.search(r"^first\s+3\s+3$", result.stdout, re.M), result.stdout
    assert re.search(r"^provider, seed\s+stripe, --seed 1$", result.stdout, re.M), result.stdout
    assert "incomplete: 3 events never acknowledged 2xx" in result.stderr


def test_ctrl_c_of_an_idle_serve_ends_without_a_warning(tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            hookinbox_command(
                "serve", "hookinbox.examples.shop:inbox", "--port", str(port),
                "--database-url", f"sqlite:///{tmp_path / 'shop.db'}",
            ),
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not _ready(port):
                assert process.poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.1)
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the group
            assert process.wait(timeout=60) == 0, log_path.read_text()
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    output = log_path.read_text()
    assert "Finished server process" in output, output
    for trouble in ("WARNING", "ERROR", "metrics", "Traceback", "Aborted"):
        assert trouble not in output, output


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False
