"""SIGKILL of HTTP server processes and of the worker, in a loop, during simulated load.

`hookinbox serve --workers 2` of the example shop runs its real process tree: a parent that
supervises two uvicorn server processes (uvicorn restarts a dead one) and a `hookinbox worker`
(serve's supervisor restarts it). While the simulator plays Stripe at it — rounds of events at
a steady rate, with duplicates, bursts, lost responses and invalid deliveries, and every
unacknowledged delivery retried on Stripe's (compressed) schedule — the test kill -9s a server
process or the worker at seeded random moments, and lets the supervisors restart them. The
load goes on, round after round, until the planned kills have happened.

Just before each kill the test fires a volley of deliveries of its own, so that some are in
flight when the process dies: a server killed before it answers leaves its client without an
answer (the client sends again; if the row was committed, the second answer is `duplicate`);
a worker killed mid-attempt (each checkout's transaction stays open 10 ms after its order is
written) rolls back with it, and the attempt's 1 s lease is swept and tried again.

It proves, on SQLite and PostgreSQL: every delivery answered 2xx is processed exactly once
(the simulator's verify against hookinbox's rows and the shop's orders: lost 0, doubled 0,
nothing invalid accepted; no handler ran twice for one order; one order per volley event),
every event is acknowledged in the end, and every kill was followed by a restart.

tests/processes/test_sigkill.py kills workers with no HTTP in the path, and
test_group_commit_sigkill.py kills the only server once; this one kills both sides,
repeatedly, under HTTP load, while another server process keeps serving.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor

import httpx
import pytest
import sqlalchemy as sa

from hookinbox._storage import Store
from hookinbox._storage._schema import events
from hookinbox.simulate import SimulationReport, verify, wait_until_drained
from tests.reliability._load import (
    ACK_TIMEOUT,
    HANDLER_SLEEP_ENV,
    SHOP_SECRET,
    TimedRun,
    accepting,
    handles_sigterm,
    listening_inode,
    outcome_counts,
    roles,
    serve_command,
    shop_config,
    stop_server,
    wait_until,
)
from tests.reliability._report import Trial, record
from tests.support.server import free_port, serving_process
from tests.support.signing import stripe_delivery, stripe_event

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

SEED = 20261201
PLANNED_KILLS = {"http": 4, "worker": 2}
"""Few worker kills: serve's supervisor doubles the worker's restart delay after each death
(0.5, 1, 2 s, ...), and the drain waits for the last restart. test_sigkill.py kills workers
by the dozen."""
ROTATION = ("worker", "http", "http")
"""What each kill takes, in turn, when both kinds can be killed."""
ROUND_EVENTS = 90
RATE = 30.0
"""Each round's first deliveries span 3 s."""
MAX_ROUNDS = 15
"""The kills must be done within this many rounds (about 45 s of load)."""
PAUSE = (0.25, 0.75)
"""Seconds between two kills, drawn from the seed (so is which server process dies)."""
HTTP_PROCESSES = 2
HANDLER_SLEEP = 0.01
"""Each checkout's transaction stays open this long after its order is written (_load.py)."""
VOLLEY = 8
"""Deliveries fired together just before each kill."""
VOLLEY_ATTEMPTS = 200
KILL_DELAY = {"http": (0.0, 0.02), "worker": (0.02, 0.1)}
"""Seconds from a volley to the kill, drawn from the seed: a server while it answers the
volley, the worker a little later, while it processes what the volley stored."""
RESTART_BOUND = 30.0
DRAIN_BOUND = 60.0


class Rounds:
    """Simulated Stripe traffic, one round after another, for as long as the kills last."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.runs: list[TimedRun] = []

    def keep_going(self) -> None:
        """Start the next round once the last has finished; fail past MAX_ROUNDS."""
        if self.runs and self.runs[-1].running():
            return
        assert len(self.runs) < MAX_ROUNDS, (
            f"the planned kills took more than {MAX_ROUNDS} rounds of load"
        )
        config = shop_config(
            self.target, events=ROUND_EVENTS, rate=RATE, seed=SEED + len(self.runs)
        )
        self.runs.append(TimedRun(config).start())

    def reports(self) -> list[SimulationReport]:
        return [run.wait(timeout=120) for run in self.runs]


class Volleys:
    """Deliveries of our own, fired together just before each kill so that some are in
    flight when the process dies. Each is sent like a provider sends it, on a new connection,
    and sent again after a cut or a 503 until it is answered 2xx."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.executor = ThreadPoolExecutor(VOLLEY, thread_name_prefix="volley")
        self.pending: list[Future[tuple[str, int]]] = []

    def fire(self) -> None:
        for _ in range(VOLLEY):
            event_id = f"evt_volley_{len(self.pending)}"
            self.pending.append(self.executor.submit(self._deliver, event_id))

    def _deliver(self, event_id: str) -> tuple[str, int]:
        """(status of the 2xx answer: accepted or duplicate, attempts cut by a kill)."""
        event = stripe_event(event_id, payment_intent=f"pi_{event_id}")
        cut = 0
        for _ in range(VOLLEY_ATTEMPTS):
            headers, body = stripe_delivery(event, SHOP_SECRET)
            try:
                with httpx.Client(timeout=ACK_TIMEOUT) as client:
                    response = client.post(self.target, headers=headers, content=body)
            except httpx.TransportError:
                cut += 1
                time.sleep(0.05)
                continue
            if response.status_code == 200:
                return str(response.json()["status"]), cut
            assert response.status_code == 503, f"{event_id}: {response.status_code}"
            time.sleep(0.05)
        raise AssertionError(f"{event_id} was never answered 2xx in {VOLLEY_ATTEMPTS} tries")

    def results(self) -> list[tuple[str, int]]:
        return [future.result(timeout=120) for future in self.pending]

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


def test_sigkill_loop_of_servers_and_worker_under_load(db_url: str, backend: str) -> None:
    rng = random.Random(SEED)
    port = free_port()
    command = serve_command(db_url, port, "--workers", str(HTTP_PROCESSES), "--lease-seconds", "1")
    env = {HANDLER_SLEEP_ENV: str(HANDLER_SLEEP)}
    with serving_process(command, port, env=env) as (server, base_url):
        target = f"{base_url}/webhooks/stripe"

        def complete() -> bool:
            found = roles(server.pid)
            return len(found["http"]) == HTTP_PROCESSES and len(found["worker"]) == 1

        wait_until(complete, timeout=RESTART_BOUND, what="the server processes and a worker")
        inode = listening_inode(port)
        assert inode is not None, f"nothing listens on port {port}"
        seen: dict[str, set[int]] = {kind: set(pids) for kind, pids in roles(server.pid).items()}
        initial = {kind: len(pids) for kind, pids in seen.items()}
        kills: Counter[str] = Counter()
        killed: set[int] = set()
        load = Rounds(target)
        volleys = Volleys(target)
        started = time.monotonic()
        try:
            while kills != Counter(PLANNED_KILLS):
                load.keep_going()
                time.sleep(rng.uniform(*PAUSE))
                found = roles(server.pid)
                for kind, pids in found.items():
                    seen[kind].update(pids)
                # A server process is killed once it serves, and only while another one does:
                # with every one down, deliveries would just wait for uvicorn to start a
                # replacement (seconds on a busy machine: its health check waits up to 5 s
                # for a process that died while being pinged), which tests nothing more.
                # The worker once its loops run, so that the kill lands mid-attempt.
                up = {pid for pid in found["http"] if accepting(pid, inode)}
                victims = {
                    "http": [pid for pid in up if up - {pid}],
                    "worker": [pid for pid in found["worker"] if handles_sigterm(pid)],
                }
                kinds = [k for k in ROTATION if victims[k] and kills[k] < PLANNED_KILLS[k]]
                if not kinds:
                    continue
                turn = ROTATION[sum(kills.values()) % len(ROTATION)]
                kind = turn if turn in kinds else kinds[0]
                victim = rng.choice(sorted(victims[kind]))
                volleys.fire()
                time.sleep(rng.uniform(*KILL_DELAY[kind]))
                try:
                    os.kill(victim, signal.SIGKILL)
                except ProcessLookupError:
                    continue  # it died on its own meanwhile: not our kill
                kills[kind] += 1
                killed.add(victim)
            chaos = time.monotonic() - started
            reports = load.reports()
            volleyed = volleys.results()
        finally:
            volleys.close()

        def replaced() -> bool:
            found = roles(server.pid)
            for kind, pids in found.items():
                seen[kind].update(pids)
            return complete() and not killed & {p for pids in found.values() for p in pids}

        wait_until(replaced, timeout=RESTART_BOUND, what="every killed process to be replaced")
        restarts = sum(len(pids) - initial[kind] for kind, pids in seen.items())
        drained = wait_until_drained(db_url, DRAIN_BOUND, since=reports[0].started_at)
        assert drained, "events still open after the kill loop"
        results = [verify(report, db_url) for report in reports]
        outcomes = outcome_counts(db_url)
        retried = _events_attempted_more_than_once(db_url)
        volley_orders = _volley_orders(db_url)
        exit_code = stop_server(server)

    total_kills = sum(kills.values())
    lost = sum(result.lost for result in results)
    doubled = sum(result.doubled for result in results)
    business_duplicates = outcomes.get("business_duplicate", 0)
    assert restarts >= total_kills, f"{total_kills} kills but only {restarts} restarts"
    assert exit_code == 0

    # Exactly once, in effect, whatever was killed when.
    for report, result in zip(reports, results, strict=True):
        assert report.unacknowledged == 0, f"seed {report.seed}: {report.unacknowledged} unacked"
        assert (result.lost, result.doubled, result.invalid_accepted) == (0, 0, 0), (
            f"seed {report.seed}: {result.problems}"
        )
        assert result.processed == result.expected == ROUND_EVENTS
        assert result.effects_found == result.effects_expected
        assert result.ok, result.problems
    assert business_duplicates == 0, outcomes
    assert volley_orders == Counter(f"pi_evt_volley_{n}" for n in range(len(volleyed)))
    cut = sum(cuts for _, cuts in volleyed)
    stored_then_cut = sum(1 for status, cuts in volleyed if cuts and status == "duplicate")

    deliveries = sum(report.deliveries for report in reports)
    failures = Counter(a.result.failure for run in load.runs for a in run.answers)
    record(
        Trial(
            fault="SIGKILL loop: HTTP server processes and worker, under simulated load",
            backend=backend,
            deliveries=deliveries + len(volleyed) + cut,
            kills=total_kills,
            restarts=restarts,
            lost=lost,
            doubled=doubled + business_duplicates,
            detail=(
                f"{kills['http']} server and {kills['worker']} worker kills in {chaos:.1f} s "
                f"({len(reports)} rounds of load, seed {SEED}); "
                f"{failures['connection error']} simulator requests cut; volleys: "
                f"{len(volleyed)} deliveries, {cut} cut by a kill and sent again "
                f"({stored_then_cut} had been stored: answered duplicate); "
                f"{retried} events needed a second attempt"
            ),
        )
    )


def _volley_orders(database_url: str) -> Counter[str]:
    """Orders per volley payment; the shop's UNIQUE payment_id keeps each to one row at most,
    so a doubled handler shows as `business_duplicate`, which the test counts separately."""
    engine = sa.create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    query = sa.text("SELECT payment_id FROM shop_orders WHERE payment_id LIKE 'pi_evt_volley_%'")
    try:
        with engine.connect() as connection:
            return Counter(str(row[0]) for row in connection.execute(query))
    finally:
        engine.dispose()


def _events_attempted_more_than_once(database_url: str) -> int:
    store = Store(database_url, auto_migrate=False)
    query = sa.select(sa.func.count()).select_from(events).where(events.c.attempts > 1)
    try:
        with store.reading() as connection:
            return int(connection.execute(query).scalar_one())
    finally:
        store.dispose()
