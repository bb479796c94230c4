"""`hookinbox demo`: the whole product, on a throwaway SQLite database, checked end to end.

1. a loopback mail service (the far side of the outbox);
2. `hookinbox serve` of the example shop (server, worker and relay) in a child process;
3. the simulator, as Stripe: duplicates, concurrent bursts, lost responses, retries, updates
   before their checkout, forged and expired signatures, malformed bodies;
4. wait until the worker has drained everything, and the relay has sent every receipt;
5. the exactly-once check: every acknowledged event processed once, one order per payment, the
   last subscription status, no forged event stored, one receipt per order.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
from rich.console import Console

from hookinbox._demo._mailbox import Mailbox
from hookinbox._operations._service import Operations
from hookinbox._records import Report
from hookinbox._storage import Store
from hookinbox.simulate import (
    SimulationConfig,
    SimulationReport,
    Verification,
    simulate,
    verify,
    wait_until_drained,
)

DEFAULT_APP = "hookinbox.examples.shop:inbox"
SECRET_ENV = "STRIPE_WEBHOOK_SECRET"
MAIL_ENV = "SHOP_EMAIL_URL"
STALL = 15.0


@dataclass
class DemoResult:
    simulation: SimulationReport
    verification: Verification
    status: Report
    receipts_expected: int
    receipts_sent: int
    """Distinct receipts the mail service applied (deduplicated by Idempotency-Key)."""
    receipt_requests: int
    """Requests the relay made (at least once: may exceed the receipts)."""
    drained: bool
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verification.ok and not self.problems


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ShopServer:
    """`hookinbox serve APP` in a child process, its output in a log file (no spam)."""

    def __init__(self, app: str, database_url: str, secret: str, mail_url: str, log: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        self._log = log.open("wb")
        env = {**os.environ, SECRET_ENV: secret, MAIL_ENV: mail_url}
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hookinbox", "serve", app, "--database-url", database_url,
             "--port", str(self.port), "--log-level", "warning"],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}: "
                                   f"{self.tail()}")  # fmt: skip
            try:
                if httpx.get(f"{self.base_url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the server was not ready within {timeout:.0f} s: {self.tail()}")

    def tail(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=45)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def run_demo(
    *,
    console: Console,
    events: int = 1500,
    app: str = DEFAULT_APP,
    database_url: str | None = None,
    workdir: Path | None = None,
    seed: int | None = None,
    drain_timeout: float = 120.0,
) -> DemoResult:
    workdir = workdir or Path(tempfile.mkdtemp(prefix="hookinbox-demo-"))
    database_url = database_url or f"sqlite:///{workdir / 'demo.db'}"
    secret = "whsec_" + secrets.token_urlsafe(24)
    with Mailbox() as mailbox:
        server = ShopServer(app, database_url, secret, mailbox.url, workdir / "server.log")
        try:
            with console.status("starting the shop (server, worker, relay) on loopback"):
                server.wait_ready()
            config = SimulationConfig(
                provider="stripe",
                secret=secret,
                target=f"{server.base_url}/webhooks/stripe",
                events=events,
                seed=seed,
                burst_rate=0.01,
                burst_size=4,
                lost_response_rate=0.005,
                out_of_order_rate=0.05,
                forged_rate=0.01,
                expired_rate=0.005,
                malformed_rate=0.005,
            )
            started = datetime.now(UTC)
            simulation = simulate(config, console=console)
            with console.status("waiting for the worker to process every event"):
                drained = wait_until_drained(database_url, drain_timeout, since=started)
            verification = verify(simulation, database_url)
            receipts_expected = len(verification_keys(simulation))
            if verification.ok:  # else the run has failed already: no point waiting
                with console.status("waiting for the relay to send every receipt"):
                    wait_for_receipts(mailbox, verification_keys(simulation), drain_timeout)
            requests, sent = mailbox.snapshot()
            store = Store(database_url, auto_migrate=False)
            status = Operations(store).report(datetime.now(UTC))  # `hookinbox status`'s
            store.dispose()
        finally:
            server.stop()
    result = DemoResult(
        simulation=simulation,
        verification=verification,
        status=status,
        receipts_expected=receipts_expected,
        receipts_sent=len(mailbox.keys() & verification_keys(simulation)),
        receipt_requests=requests,
        drained=drained,
    )
    if not drained:
        result.problems.append(f"the worker did not drain within {drain_timeout:.0f} s")
    if result.receipts_sent != receipts_expected:
        result.problems.append(
            f"receipts: {result.receipts_sent} sent of {receipts_expected} orders"
        )
    if sent != result.receipts_sent:
        result.problems.append(f"{sent - result.receipts_sent} receipts for no order")
    return result


def wait_for_receipts(mailbox: Mailbox, expected: set[str], timeout: float) -> None:
    """Until every expected receipt arrived, the timeout passed, or the relay sent nothing new
    for STALL seconds (an app without receipts must not keep the demo waiting)."""
    deadline = time.monotonic() + timeout
    last_change, last_count = time.monotonic(), -1
    while time.monotonic() < deadline and time.monotonic() - last_change < STALL:
        arrived = len(mailbox.keys() & expected)
        if arrived == len(expected):
            return
        if arrived != last_count:
            last_change, last_count = time.monotonic(), arrived
        time.sleep(0.2)


def verification_keys(simulation: SimulationReport) -> set[str]:
    """The receipt key of each order the shop must have: one per acknowledged checkout."""
    return {f"receipt:{payment}" for payment in simulation.expected_effects}
