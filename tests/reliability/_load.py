"""Load for the reliability tests: the example shop under `hookinbox serve`, the simulator
playing Stripe at it with the moment of every answer recorded, and what a test needs to see
of serve's processes and of the database afterwards.

- `shop` (SHOP_APP): the app that is served, the example shop with quicker retries;
- `TimedRun`: the simulator in a background thread. Its report says what was answered, not
  when; a test that breaks something midway must tell the deliveries made during the fault
  from the others, so `simulate_timed` runs the simulator's own sender with a callback that
  stamps each answer with the monotonic clock, and builds the same report `simulate` would;
- `roles`, `accepting`, `handles_sigterm`: serve's children (uvicorn server processes and the
  worker) and whether each is serving yet, read from Linux /proc;
- `outcome_counts`: what the worker made of the events.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from hookinbox import Event, HandlerContext, Inbox, RetryPolicy
from hookinbox._storage import Store
from hookinbox._storage._schema import events
from hookinbox.simulate import SimulationConfig, SimulationReport, run_simulation
from hookinbox.simulate._sender import DeliveryResult
from tests.support.server import hookinbox_command

SHOP_APP = "tests.reliability._load:shop"
SHOP_SECRET = "whsec_local_trial"
QUICK_RETRY = RetryPolicy(first_delay=0.3, factor=2.0, max_delay=2.0)
"""The shop's retries in fractions of a second rather than 5 s, 20 s, 80 s: a fault leaves
events swept back from a lost attempt and updates deferred behind their checkout, and with the
default policy the drain after it took 5 to 25 s depending on how the retries fell."""
RETRY_COMPRESSION = 10_000.0
"""Stripe's 5 s, 5 min, 30 min, 2 h, 5 h, then 10 h become 0.5 ms, 30 ms, 180 ms, 0.72 s, 1.8 s,
then 3.6 s: an event whose deliveries keep failing is retried for about 24 s before Stripe would
give up, so a fault of a few seconds is ridden out within the test, as it is in production."""
ACK_TIMEOUT = 15.0
"""Longer than any bound a test asserts: a slow answer shows as a latency, not a timeout."""


HANDLER_SLEEP_ENV = "RELIABILITY_HANDLER_SLEEP"
"""Seconds a checkout's processing transaction stays open after the order is written: the time
a real handler spends on its work. A worker killed at a random moment is then often caught
between the effect's write and the commit, the case that must roll back and be retried."""
_shop: Inbox | None = None


def __getattr__(name: str) -> Inbox:
    """`shop`: the example shop with `QUICK_RETRY` (and `HANDLER_SLEEP_ENV`), for `serve`.

    Built on first access, so only in the server's and worker's processes: the handler it
    may add goes into the registry it shares with `hookinbox.examples.shop.inbox`, which
    other tests use in their own process.
    """
    global _shop
    if name != "shop":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _shop is None:
        from hookinbox.examples import shop

        _shop = shop.inbox.with_settings(retry=QUICK_RETRY)
        pause = float(os.environ.get(HANDLER_SLEEP_ENV, "0"))
        if pause:

            @_shop.handler("stripe", "checkout.session.completed")
            def hold_the_transaction(event: Event, ctx: HandlerContext) -> None:
                time.sleep(pause)  # runs after create_order, in the same transaction

    return _shop


def shop_config(
    target: str, *, events: int, rate: float, seed: int, **overrides: Any
) -> SimulationConfig:
    """Stripe at the shop: duplicates, bursts, lost responses, updates sent before their
    checkout, and forged, expired and malformed deliveries, each at a few percent."""
    settings: dict[str, Any] = {
        "concurrency": 8,
        "duplicate_rate": 0.05,
        "burst_rate": 0.02,
        "burst_size": 3,
        "lost_response_rate": 0.01,
        "out_of_order_rate": 0.1,
        "forged_rate": 0.01,
        "expired_rate": 0.01,
        "malformed_rate": 0.01,
        "retry_compression": RETRY_COMPRESSION,
        "timeout": ACK_TIMEOUT,
        **overrides,
    }
    return SimulationConfig(
        provider="stripe",
        secret=SHOP_SECRET,
        target=target,
        events=events,
        rate=rate,
        seed=seed,
        **settings,
    )


@dataclass(frozen=True, slots=True)
class Answer:
    """One delivery's result and when (time.monotonic) its answer came in."""

    result: DeliveryResult
    finished: float

    @property
    def started(self) -> float | None:
        """When the request went out; None when no answer was read (timeout, lost, refused).

        For a burst the callback comes once every copy is answered, so `finished` may be a
        little late and `started` with it: callers leave bursts out of timing checks.
        """
        if self.result.latency is None:
            return None
        return self.finished - self.result.latency


@dataclass
class TimedRun:
    """A simulator run in a background thread; `answers` fills in while it runs."""

    config: SimulationConfig
    answers: list[Answer] = field(default_factory=list)
    report: SimulationReport | None = None
    error: BaseException | None = None
    _thread: threading.Thread | None = None

    def start(self) -> TimedRun:
        self._thread = threading.Thread(target=self._run, name="simulator", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.report = asyncio.run(simulate_timed(self.config, self.answers.append))
        except BaseException as error:  # re-raised in the test's thread by `wait`
            self.error = error

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: float) -> SimulationReport:
        assert self._thread is not None, "the run was never started"
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the simulator did not finish within {timeout} s"
        if self.error is not None:
            raise self.error
        assert self.report is not None
        return self.report


async def simulate_timed(
    config: SimulationConfig, on_answer: Callable[[Answer], None]
) -> SimulationReport:
    """`hookinbox.simulate.run_simulation` without the progress bar, stamping each answer."""
    assert config.seed is not None, "a reliability run is replayable: give it a seed"
    return await run_simulation(
        config,
        progress=False,
        on_result=lambda result: on_answer(Answer(result, time.monotonic())),
    )


# -- the server ---------------------------------------------------------------------------------


def serve_command(database_url: str, port: int, *extra: str) -> list[str]:
    return hookinbox_command(
        "serve", SHOP_APP, "--database-url", database_url, "--port", str(port),
        "--log-level", "warning", *extra,
    )  # fmt: skip


def children(pid: int) -> list[int]:
    """Child processes of `pid`, whichever of its threads started them (Linux /proc)."""
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return []
    for task in tasks:
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue  # the thread ended while we looked
    return sorted(found)


def role(pid: int) -> str | None:
    """What a child of `hookinbox serve` is: "worker", "http" (a uvicorn server process), or
    None (gone, or a helper such as multiprocessing's resource tracker)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return None
    if b"worker" in argv and b"hookinbox" in argv:
        return "worker"
    if any(b"multiprocessing.spawn" in part for part in argv):
        return "http"
    return None


def roles(server_pid: int) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {"http": [], "worker": []}
    for child in children(server_pid):
        kind = role(child)
        if kind is not None:
            found[kind].append(child)
    return found


def handles_sigterm(pid: int) -> bool:
    """True once a worker has started its loops: it installs its SIGTERM handler after the
    database first answered (a worker starting while the database is down exits 1, and serve's
    supervisor starts another)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (signal.SIGTERM - 1) & 1)


def listening_inode(port: int) -> str | None:
    """The inode of the TCP socket listening on 127.0.0.1:`port` (Linux /proc/net/tcp)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, inode = fields[1], fields[3], fields[9]
        if int(local.split(":")[1], 16) == port and state == "0A":  # 0A: LISTEN
            return inode
    return None


def accepting(pid: int, inode: str) -> bool:
    """True when process `pid` has the listening socket `inode` in its event loop's epoll set:
    it accepts connections. uvicorn's server processes all inherit the socket, but one that
    is still starting (importing, running the app factory) has not registered it yet."""
    try:
        links = {fd.name: os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()}
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:  # an fd closed while we listed them: ask again next time
        return False
    listening = {name for name, link in links.items() if link == f"socket:[{inode}]"}
    for name, link in links.items():
        if link != "anon_inode:[eventpoll]":
            continue
        try:
            info = Path(f"/proc/{pid}/fdinfo/{name}").read_text()
        except (FileNotFoundError, ProcessLookupError):
            return False
        watched = {line.split()[1] for line in info.splitlines() if line.startswith("tfd:")}
        if listening & watched:
            return True
    return False


def ready(base_url: str, timeout: float = 2) -> int | None:
    """/readyz's status, or None when the server does not answer."""
    try:
        return httpx.get(f"{base_url}/readyz", timeout=timeout).status_code
    except httpx.TransportError:
        return None


def wait_until(condition: Callable[[], bool], *, timeout: float, what: str) -> float:
    """Poll until true; returns the seconds it took, fails with `what` after `timeout`."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - started


def stop_server(process: subprocess.Popen[str], timeout: float = 30) -> int:
    """SIGTERM; the exit code (a server that does not stop is killed, and the test fails)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError(f"the server did not exit within {timeout} s of SIGTERM") from None


# -- what the database holds --------------------------------------------------------------------


def outcome_counts(database_url: str) -> dict[str, int]:
    """Events by outcome. `business_duplicate` means a handler ran again for an effect that
    was already applied (the shop's UNIQUE payment_id caught it): a doubled application the
    effects table alone cannot show, since the constraint keeps it to one row."""
    store = Store(database_url, auto_migrate=False)
    query = sa.select(events.c.outcome, sa.func.count()).group_by(events.c.outcome)
    try:
        with store.reading() as connection:
            return {str(outcome): int(count) for outcome, count in connection.execute(query)}
    finally:
        store.dispose()
