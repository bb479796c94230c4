"""The database stopped and started again under load, for any server a test owns.

A real `hookinbox serve` of the example shop (HTTP and its worker) runs against a database on
a server of the test's own (PostgreSQL: `_cluster.py`; MariaDB: `_mariadb.py`; the shared test
servers are never touched). The simulator plays a few hundred Stripe events at a steady rate,
with duplicates, bursts, lost responses and invalid ones, retrying every unacknowledged
delivery on Stripe's schedule (compressed). Once per stop mode the test stops the server, keeps
it down for a few seconds while it sends deliveries of its own (probes), and starts it again.

`check` proves:
- while the database is down every valid delivery is answered 503 with Retry-After, quickly
  (never 200, never 500, never left hanging), and an invalid one still gets its 401/400;
  /readyz answers 503 too;
- the 503 wrote nothing: a delivery refused during the outage is `accepted` (new) afterwards;
- the server recovers by itself: /readyz answers 200 again, the pools reconnect, the same
  server and worker processes go on (nothing was restarted but the database);
- afterwards every delivery answered 2xx is processed exactly once (the simulator's verify:
  lost 0, doubled 0, nothing invalid accepted; no handler ran twice for one order).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import httpx
import sqlalchemy as sa

from hookinbox._storage import parse_url
from hookinbox.simulate import SimulationReport, Verification, verify, wait_until_drained
from hookinbox.simulate._plan import INVALID_KINDS
from tests.reliability._load import (
    SHOP_SECRET,
    Answer,
    TimedRun,
    handles_sigterm,
    outcome_counts,
    ready,
    roles,
    serve_command,
    shop_config,
    stop_server,
    wait_until,
)
from tests.reliability._report import Trial, record
from tests.support.server import free_port, serving_process
from tests.support.signing import stripe_delivery, stripe_event

EVENTS = 320
RATE = 40.0
"""First deliveries per second: they span 8 s, and both outages fall inside."""
ANSWERS_BEFORE_STOP = 30
"""Deliveries answered 2xx before each stop (after the first: since the database came back)."""
DOWN_FOR = 2.5
PROBE_INTERVAL = 0.2
LATENCY_BOUND = 8.0
"""Seconds within which a delivery must be answered while the database is down. Today the
pool and connect timeouts are 5 s each; a refused connection is answered far sooner."""
RECOVERY_BOUND = 20.0
"""Seconds after the database is up again within which /readyz must answer 200."""
DRAIN_BOUND = 60.0


Mode = TypeVar("Mode", bound=str)
"""How a server is stopped: each server's own Literal (`fast`, `immediate`; `clean`, `kill`)."""
_Mode = TypeVar("_Mode", bound=str, contravariant=True)


class Server(Protocol[_Mode]):
    """A database server the test owns: `_cluster.PostgresCluster`, `_mariadb.MariaDBServer`."""

    def stop(self, mode: _Mode) -> None: ...

    def start(self) -> None: ...


@dataclass
class Outage(Generic[Mode]):
    """One stop and start of the database, and what the server answered meanwhile."""

    mode: Mode
    down_at: float = 0.0
    """time.monotonic() once the database had stopped..."""
    up_from: float = 0.0
    """...and when its start began."""
    start_took: float = 0.0
    recovery: float = 0.0
    """Seconds from the database accepting connections to /readyz answering 200."""
    probes: list[tuple[httpx.Response, float]] = field(default_factory=list)
    """Our own deliveries sent while it was down: (response, seconds)."""
    readyz_status: int = 0
    readyz_retry_after: str | None = None


@dataclass
class Restarts:
    """What a run of `ride_restarts` saw: the simulator's answers and the database after."""

    outages: list[Outage[Any]]
    answers: list[Answer]
    report: SimulationReport
    result: Verification
    outcomes: dict[str, int]
    redelivered: list[httpx.Response]
    probe_orders: int
    worker_before: int
    workers_after: list[int]
    exit_code: int


def probe(client: httpx.Client, url: str, event_id: str) -> tuple[httpx.Response, float]:
    """One checkout of our own, signed as Stripe signs it; (response, seconds to answer)."""
    event = stripe_event(event_id, payment_intent=f"pi_{event_id}")
    headers, body = stripe_delivery(event, SHOP_SECRET)
    started = time.monotonic()
    response = client.post(url, headers=headers, content=body)
    return response, time.monotonic() - started


def probe_id(mode: str, number: int) -> str:
    return f"evt_probe_{mode}_{number}"


def ride(server: Server[Mode], base_url: str, outage: Outage[Mode]) -> None:
    """Stop the database, send probes for DOWN_FOR seconds, start it, wait for /readyz 200."""
    target = f"{base_url}/webhooks/stripe"
    server.stop(outage.mode)
    outage.down_at = time.monotonic()
    with httpx.Client(timeout=30) as client:
        while time.monotonic() - outage.down_at < DOWN_FOR:
            outage.probes.append(probe(client, target, probe_id(outage.mode, len(outage.probes))))
            time.sleep(PROBE_INTERVAL)
        readyz = client.get(f"{base_url}/readyz")
    outage.readyz_status = readyz.status_code
    outage.readyz_retry_after = readyz.headers.get("retry-after")
    outage.up_from = time.monotonic()
    server.start()
    outage.start_took = time.monotonic() - outage.up_from
    outage.recovery = wait_until(
        lambda: ready(base_url) == 200,
        timeout=RECOVERY_BOUND,
        what=f"/readyz to answer 200 after the database came back ({outage.mode})",
    )


def during(answers: list[Answer], start: float, end: float) -> list[Answer]:
    """Answers to requests sent and answered entirely within [start, end] (bursts left out:
    their timing is approximate, see `Answer.started`)."""
    inside = []
    for answer in answers:
        started = answer.started
        if answer.result.kind == "burst" or started is None:
            continue
        if started >= start and answer.finished <= end:
            inside.append(answer)
    return inside


def wait_for_load(run: TimedRun, since: float) -> None:
    """Until ANSWERS_BEFORE_STOP deliveries were accepted after `since` (or the run ended)."""

    def enough() -> bool:
        accepted = sum(1 for a in run.answers if a.result.accepted and a.finished > since)
        return accepted >= ANSWERS_BEFORE_STOP or not run.running()

    wait_until(enough, timeout=60, what=f"{ANSWERS_BEFORE_STOP} deliveries accepted")


def ride_restarts(
    server: Server[Mode], database_url: str, modes: tuple[Mode, ...], *, seed: int
) -> Restarts:
    """`hookinbox serve` under the simulator's load, the database stopped once per mode."""
    port = free_port()
    command = serve_command(database_url, port, "--lease-seconds", "2")
    outages = [Outage(mode) for mode in modes]
    with serving_process(command, port) as (process, base_url):
        target = f"{base_url}/webhooks/stripe"
        wait_until(lambda: len(roles(process.pid)["worker"]) == 1, timeout=30, what="the worker")
        [worker_before] = roles(process.pid)["worker"]
        # A running worker must ride the outage out; one still starting exits and is restarted.
        wait_until(lambda: handles_sigterm(worker_before), timeout=30, what="the worker's loops")

        run = TimedRun(shop_config(target, events=EVENTS, rate=RATE, seed=seed)).start()
        since = 0.0
        for outage in outages:
            wait_for_load(run, since)
            assert run.running(), f"the simulator finished before the {outage.mode} outage"
            ride(server, base_url, outage)
            since = time.monotonic()

        report = run.wait(timeout=120)
        # Probes refused during the outages, delivered again: new to the inbox, so accepted.
        with httpx.Client(timeout=30) as client:
            redelivered = [
                probe(client, target, probe_id(outage.mode, n))[0]
                for outage in outages
                for n in range(len(outage.probes))
            ]
        assert wait_until_drained(database_url, DRAIN_BOUND, since=report.started_at), (
            "events still open after the restarts"
        )
        restarts = Restarts(
            outages=list(outages),
            answers=run.answers,
            report=report,
            result=verify(report, database_url),
            outcomes=outcome_counts(database_url),
            redelivered=redelivered,
            probe_orders=_probe_orders(database_url),
            worker_before=worker_before,
            workers_after=roles(process.pid)["worker"],
            exit_code=0,
        )
        restarts.exit_code = stop_server(process)
    return restarts


def check(restarts: Restarts, *, fault: str, backend: str) -> None:
    """Assert what the module docstring promises, then record the trial for the report."""
    answers, outages, result = restarts.answers, restarts.outages, restarts.result
    statuses = Counter(a.result.status for a in answers)
    failures = Counter(a.result.failure for a in answers if a.result.failure)
    probes = [p for outage in outages for p in outage.probes]
    refused = [a.result.latency for a in answers if a.result.status == 503 and a.result.latency]
    max_503 = max([*refused, *(seconds for _, seconds in probes)])
    inside: dict[str, int] = {}

    # While it was down: 503 with Retry-After, each within the bound; invalid still refused.
    for outage in outages:
        down = during(answers, outage.down_at, outage.up_from)
        valid = [a for a in down if a.result.kind not in INVALID_KINDS]
        invalid = [a for a in down if a.result.kind in INVALID_KINDS]
        inside[outage.mode] = len(valid)
        assert len(valid) >= 20, f"{outage.mode}: only {len(valid)} deliveries inside the outage"
        assert Counter(a.result.status for a in valid) == {503: len(valid)}, outage.mode
        assert all(a.result.status in (400, 401) for a in invalid), (outage.mode, invalid)
        assert outage.probes, outage.mode
        assert [r.status_code for r, _ in outage.probes] == [503] * len(outage.probes)
        assert outage.readyz_status == 503 and outage.readyz_retry_after, outage.mode
    assert all(r.headers.get("retry-after", "").isdigit() for r, _ in probes)
    assert all(r.json()["error"] == "unavailable" for r, _ in probes)
    assert max_503 < LATENCY_BOUND, f"a 503 took {max_503:.2f} s"
    # Never a 500, never an answer missing: only what the plan itself drops ("lost").
    assert not [s for s in statuses if s is not None and s >= 500 and s != 503], statuses
    assert set(failures) <= {"lost"}, failures

    # It came back by itself, in the same processes; the 503s had written nothing.
    assert restarts.workers_after == [restarts.worker_before], (
        "the worker was restarted: it should have waited"
    )
    assert restarts.exit_code == 0
    assert [r.status_code for r in restarts.redelivered] == [200] * len(probes)
    assert {r.json()["status"] for r in restarts.redelivered} == {"accepted"}, (
        "a 503 left a row behind"
    )
    assert restarts.probe_orders == len(probes)

    # Every acknowledged delivery processed exactly once.
    report, outcomes = restarts.report, restarts.outcomes
    assert report.unacknowledged == 0, f"{report.unacknowledged} events never acknowledged"
    assert (result.lost, result.doubled, result.invalid_accepted) == (0, 0, 0), result.problems
    assert result.processed == result.expected == EVENTS
    assert result.ok, result.problems
    assert outcomes.get("business_duplicate", 0) == 0, outcomes

    per_outage = "; ".join(
        f"{o.mode}: {inside[o.mode]} deliveries and {len(o.probes)} probes wholly inside "
        f"answered 503, /readyz 200 {o.recovery:.1f} s after a start of {o.start_took:.1f} s"
        for o in outages
    )
    record(
        Trial(
            fault=fault,
            backend=backend,
            deliveries=report.deliveries + 2 * len(probes),
            restarts=len(outages),
            lost=result.lost,
            doubled=result.doubled + outcomes.get("business_duplicate", 0),
            detail=(
                f"down {DOWN_FOR} s each; {statuses[503]} answered 503 (probes: all with "
                f"Retry-After), none 200 or 500 while down; max 503 latency {max_503:.3f} s; "
                f"{per_outage}; no hookinbox process restarted"
            ),
        )
    )


def _probe_orders(database_url: str) -> int:
    engine = sa.create_engine(parse_url(database_url))  # the driver hookinbox uses
    try:
        with engine.connect() as connection:
            query = sa.text(
                "SELECT count(*) FROM shop_orders WHERE payment_id LIKE 'pi_evt_probe_%'"
            )
            return int(connection.execute(query).scalar_one())
    finally:
        engine.dispose()
