"""`check_exactly_once`: prove that a user's handlers apply each event exactly once.

hookinbox makes the inbox exactly-once; the effects are the handlers'. This check plays a
provider and a failing worker against the application's inbox, on a throwaway database, and
asks the user's `effects` function what was applied:

- every event is delivered several times (`copies`), in a shuffled order, in batches sent at
  once, through the inbox's HTTP contract (`InboxHarness`);
- workers process between batches, several threads at once;
- chosen events' first attempt dies after the handlers ran and before the commit, as a
  worker killed there would (the transaction is rolled back; whatever the handlers did
  outside it stays done), and is retried;
- the clock moves on until every retry and NotReady deferral has run;
- every event is delivered once more, late, and processing runs again.

Then each expected effect must be found exactly once: the oracle `hookinbox simulate --verify`
uses (`hookinbox._exactly_once`). With hypothesis installed, schedules are searched and a
failing one is shrunk to a minimal one; without it, seeded random schedules are tried. The
three classic mistakes fail it: a write on another connection than `ctx.db`, an external call
made in the handler instead of through the outbox (both doubled by the retried attempt), and
a check-then-insert on a business key with no unique constraint (doubled by two workers;
on PostgreSQL: SQLite's processing transaction holds the database's write lock, so there
the race cannot happen and the check cannot show it).
"""

from __future__ import annotations

import asyncio
import random
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection

from hookinbox._errors import HookinboxError
from hookinbox._exactly_once import EffectsVerdict, judge_effects
from hookinbox._inbox import Inbox
from hookinbox._model import Event, Status
from hookinbox._processing._handlers import ANY_TYPE, Handler
from hookinbox._runtime import Runtime
from hookinbox.testing._harness import InboxHarness
from hookinbox.testing._signing import Body

EventSpec = tuple[str, Body] | tuple[str, Body, Mapping[str, Any]]
Effects = Callable[[Connection], Iterable[Hashable | tuple[Hashable, Any]]]

OPEN = frozenset({Status.PENDING, Status.PROCESSING, Status.DEFERRED})
STEP = timedelta(hours=1)
"""How far the clock moves between rounds: past any retry's backoff (capped at an hour)."""
MAX_ROUNDS = 48
MAX_RESENDS = 5
RENDEZVOUS_TIMEOUT = 0.5
PROCESS_TIMEOUT = 60.0
"""Each worker thread's `process_due(timeout=...)`: no new item is started after it."""
JOIN_GRACE = 60.0
"""How long past `PROCESS_TIMEOUT` a worker thread may take to return (the item it was on)
before the check gives up on it and fails, naming where each thread stands."""


class ExactlyOnceViolation(HookinboxError, AssertionError):
    """An event's effect was lost or applied more than once; the message has the schedule."""

    def __init__(self, message: str, *, schedule: str = "", problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.schedule = schedule
        self.problems = tuple(problems)


class InjectedCrash(Exception):
    """Raised by the check after an event's handlers ran: its attempt dies before the commit."""


@dataclass(frozen=True)
class Schedule:
    """One way the deliveries and the workers can go."""

    order: tuple[int, ...]
    """The event of each delivery, in sending order (each event `copies` times)."""
    batches: tuple[int, ...]
    """How many consecutive deliveries are sent at once."""
    process_after: tuple[bool, ...]
    """For each batch: do workers process what is due once it is answered?"""
    crashes: frozenset[int]
    """Events whose first attempt dies after their handlers ran, before the commit."""
    workers: int
    """Threads processing at once."""

    def describe(self, names: Sequence[str]) -> str:
        lines = []
        position = 0
        seen: Counter[int] = Counter()
        for size, process in zip(self.batches, self.process_after, strict=True):
            chunk = self.order[position : position + size]
            position += size
            parts = []
            for index in chunk:
                seen[index] += 1
                parts.append(f"{names[index]} (copy {seen[index]})")
            verb = "deliver at once" if size > 1 else "deliver"
            lines.append(f"{verb} {', '.join(parts)}")
            if process:
                lines.append(f"process with {self.workers} worker(s)")
        lines.append(f"then process with {self.workers} worker(s) until done, moving the clock")
        lines.append("then deliver every event once more, and process")
        if self.crashes:
            crashed = ", ".join(names[i] for i in sorted(self.crashes))
            lines.append(f"the first attempt of {crashed} dies after its handlers, before commit")
        return "\n".join(f"  {n}. {line}" for n, line in enumerate(lines, 1))


@dataclass(frozen=True)
class ExactlyOnceReport:
    """What `check_exactly_once` tried; returned when every schedule held."""

    schedules: int
    events: int
    deliveries: int
    searched_with: str
    """`hypothesis` or `random`."""
    verdicts: list[EffectsVerdict] = field(default_factory=list, repr=False)


@dataclass
class _Outcome:
    verdict: EffectsVerdict
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


class WorkerStuck(HookinboxError):
    """A worker thread of the check did not return in time: a hang, reported with where
    every thread of the process stood, rather than a test run that never ends."""

    def __init__(self, stuck: Sequence[threading.Thread], waited: float) -> None:
        frames = sys._current_frames()
        stacks = []
        for thread in threading.enumerate():
            frame = frames.get(thread.ident or -1)
            if frame is not None:
                stack = "".join(traceback.format_stack(frame))
                stacks.append(f"--- thread {thread.name} ---\n{stack}")
        names = ", ".join(thread.name for thread in stuck)
        super().__init__(
            f"worker thread(s) {names} still running {waited:.0f} s after they started; "
            "where every thread stands:\n" + "\n".join(stacks) + _awaiting_tasks()
        )


def _awaiting_tasks() -> str:
    """Where each task of every live event loop waits: an idle loop's thread stack shows only
    `select`; the coroutine that waits in vain is down a task's chain of awaits."""
    import gc

    found = []
    # By type, not isinstance: a lazy proxy (Django's settings) would evaluate itself.
    loops = [o for o in gc.get_objects() if issubclass(type(o), asyncio.AbstractEventLoop)]
    for loop in loops:
        if loop.is_closed():
            continue
        for task in list(asyncio.all_tasks(loop)):
            found.append(f"--- task {task.get_name()} ---\n" + _await_chain(task.get_coro()))
    if not found:
        return ""
    return "\n\nwhere every task of a live event loop waits:\n" + "\n".join(found)


def _await_chain(awaited: Any) -> str:
    """A suspended coroutine's frames down to what it awaits (a task's own stack holds only
    its outermost frame)."""
    lines = []
    while awaited is not None:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is None:
            lines.append(f"  awaiting {awaited!r}")
            break
        code = frame.f_code
        lines.append(f"  {code.co_filename}:{frame.f_lineno} in {code.co_name}")
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return "\n".join(lines)


class _Rendezvous:
    """Workers wait here for each other (briefly) before committing, so two attempts overlap:
    what makes a check-then-insert race show on PostgreSQL. A party that waits in vain (its
    peer is blocked on a lock, or idle) leaves after the timeout."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self._condition = threading.Condition()
        self._waiting = 0
        self._generation = 0

    def meet(self) -> None:
        with self._condition:
            if self.parties < 2:
                return
            generation = self._generation
            self._waiting += 1
            if not self._release():
                met = self._condition.wait_for(
                    lambda: self._generation != generation, RENDEZVOUS_TIMEOUT
                )
                if not met:
                    self._waiting -= 1

    def leave(self) -> None:
        """A worker found nothing more to do: nobody waits for it any more."""
        with self._condition:
            self.parties -= 1
            self._release()

    def _release(self) -> bool:
        if self._waiting and self._waiting >= self.parties:
            self._waiting = 0
            self._generation += 1
            self._condition.notify_all()
            return True
        return False


class _CheckedHarness(InboxHarness):
    """A harness whose inbox copy runs one more handler last for every event: the fault."""

    def __init__(self, inbox: Inbox, schedule: Schedule, ids: Mapping[str, int], **kw: Any):
        self.schedule = schedule
        self.ids = ids
        self.rendezvous = _Rendezvous(schedule.workers)
        super().__init__(inbox, **kw)
        self.concurrent_commits = not self.inbox.store.dialect.single_writer

    def _copy(self, inbox: Inbox, **settings: Any) -> Inbox:
        twin = inbox.with_settings(**settings)
        registry = twin._registry.copy()
        for name in registry.sources:
            step = Handler(
                source=name, event_type=ANY_TYPE, function=self.last_step, is_async=False
            )
            registry.add_handler(step, started=False)
        twin._registry = registry
        twin._runtime = Runtime(twin.settings, registry, twin._store_factory())
        return twin

    def last_step(self, event: Event, ctx: Any) -> None:
        if self.concurrent_commits:
            self.rendezvous.meet()
        index = self.ids.get(f"{event.source}\0{event.id}")
        if index in self.schedule.crashes and ctx.attempt == 1:
            raise InjectedCrash(f"injected: {event.source} {event.id} dies before its commit")

    def process(self) -> None:
        if self.schedule.workers == 1:
            self.run_due()
            return
        errors: list[BaseException] = []
        self.rendezvous = _Rendezvous(self.schedule.workers)

        def work() -> None:
            inbox = self._worker_inbox()
            try:
                inbox.process_due(timeout=PROCESS_TIMEOUT)
            except BaseException as error:  # reported to the caller's thread below
                errors.append(error)
            finally:
                self.rendezvous.leave()
                if inbox is not self.inbox:
                    inbox.close()

        # Daemon threads: one that never returns must not keep the test process alive too.
        threads = [
            threading.Thread(target=work, name=f"hookinbox-check-{number}", daemon=True)
            for number in range(self.schedule.workers)
        ]
        for thread in threads:
            thread.start()
        waited = PROCESS_TIMEOUT + JOIN_GRACE
        deadline = time.monotonic() + waited
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [thread for thread in threads if thread.is_alive()]
        if stuck:
            raise WorkerStuck(stuck, waited)
        if errors:
            raise errors[0]

    def _worker_inbox(self) -> Inbox:
        """What one worker thread processes with. A sync inbox is shared, as a worker's
        threads share one. An async inbox's pool belongs to one event loop, and each thread
        runs a loop of its own (`process_due`): each gets its own copy, with its own pool, on
        the same database, handlers and clock, as each async worker process has its own."""
        return self.inbox.with_settings() if self.inbox.is_async else self.inbox

    def open_events(self) -> list[Event]:
        return [event for event in self.events() if event.status in OPEN]


def check_exactly_once(
    inbox: Inbox,
    events: Sequence[EventSpec],
    *,
    effects: Effects,
    expected: Collection[Hashable] | Mapping[Hashable, Any],
    copies: int = 3,
    examples: int = 20,
    database_url: str | None = None,
    reset: Callable[[], None] | None = None,
    seed: int | None = None,
    max_workers: int = 3,
    shrink_budget: int = 30,
    use_hypothesis: bool | None = None,
) -> ExactlyOnceReport:
    """Deliver `events` to a copy of `inbox` in many schedules; each `expected` effect once.

    `events`: `(source, payload)` or `(source, payload, fields)`, as `sign` takes them; each is
    one event, delivered `copies` times. `effects(connection)` returns what was applied, one
    item per effect: a key, or `(key, state)`. `expected` names the keys that must each be
    found exactly once (a mapping also gives each key's expected final state).
    `reset()` runs before each schedule: clear what `effects` reads outside the database.
    `database_url`: a PostgreSQL server to make each schedule's database on (see
    `InboxHarness`); default, SQLite files. `max_workers`: at most this many threads process
    at once (1 under Django's test runner, whose connections are per thread).
    `shrink_budget`: how many more schedules hypothesis may run, once one failed, to find a
    smaller one (each runs on a fresh database: a second or so on PostgreSQL).

    Raises `ExactlyOnceViolation` (an `AssertionError`) with the failing schedule, minimal
    when hypothesis searched; returns an `ExactlyOnceReport` when every schedule held.
    """
    if not events:
        raise ValueError("check_exactly_once needs at least one event")
    if copies < 1 or examples < 1 or max_workers < 1:
        raise ValueError("copies, examples and max_workers must be at least 1")
    wanted = _expected(expected)
    names = [_name(spec, i) for i, spec in enumerate(events)]

    stuck: list[WorkerStuck] = []

    def run(schedule: Schedule) -> _Outcome:
        # A hang ends the search at once: hypothesis would otherwise shrink it, schedule
        # after schedule, each waiting out the stuck threads again.
        if stuck:
            raise stuck[0]
        try:
            return _run(inbox, events, schedule, effects, wanted, database_url, reset)
        except WorkerStuck as error:
            stuck.append(error)
            raise

    hypothesis = _hypothesis() if use_hypothesis is not False else None
    if use_hypothesis and hypothesis is None:
        raise ValueError("use_hypothesis=True, but hypothesis is not installed")
    if hypothesis is not None:
        shape = Shape(len(events), copies, max_workers)
        failure, verdicts = _search(hypothesis, run, shape, examples, seed, shrink_budget)
        how = "hypothesis"
    else:
        failure, verdicts = _sample(run, Shape(len(events), copies, max_workers), examples, seed)
        how = "random"
    if failure is not None:
        schedule, outcome = failure
        described = schedule.describe(names)
        problems = "\n".join(f"- {p}" for p in outcome.problems)
        raise ExactlyOnceViolation(
            f"not exactly once ({how} search, {len(verdicts)} schedules tried):\n{problems}\n"
            f"failing schedule{' (minimal)' if how == 'hypothesis' else ''}:\n{described}",
            schedule=described,
            problems=outcome.problems,
        )
    return ExactlyOnceReport(
        schedules=len(verdicts),
        events=len(events),
        deliveries=len(events) * copies,
        searched_with=how,
        verdicts=verdicts,
    )


# -- one schedule --------------------------------------------------------------------------------


def _run(
    inbox: Inbox,
    events: Sequence[EventSpec],
    schedule: Schedule,
    effects: Effects,
    expected: Mapping[str, str | None],
    database_url: str | None,
    reset: Callable[[], None] | None,
) -> _Outcome:
    if reset is not None:
        reset()
    problems: list[str] = []
    ids: dict[str, int] = {}
    with _CheckedHarness(inbox, schedule, ids, database_url=database_url) as harness:
        signed = []
        for index, spec in enumerate(events):
            source, payload, fields = spec[0], spec[1], dict(spec[2]) if len(spec) > 2 else {}
            headers, body = harness.sign(source, payload, **fields)
            identity = harness.inbox.sources[source].identify(
                {k.lower(): v for k, v in headers.items()}, body
            )
            ids[f"{source}\0{identity.event_id}"] = index
            signed.append((source, payload, fields))
        position = 0
        for size, process in zip(schedule.batches, schedule.process_after, strict=True):
            chunk = [signed[i] for i in schedule.order[position : position + size]]
            position += size
            problems += _send(harness, chunk)
            if process:
                harness.process()
        _settle(harness)
        # A late redelivery of every event (a provider's last retry, a manual resend from its
        # dashboard), once all is processed: answered as a duplicate, applied no more.
        problems += _send(harness, signed)
        _settle(harness)
        for event in harness.events():
            if event.status in OPEN:
                problems.append(f"{event.source} {event.id} still {event.status.value}")
            elif event.status is Status.FAILED:
                error = (event.last_error or "").splitlines()[0:1]
                problems.append(f"{event.source} {event.id} failed: {''.join(error)}")
        with harness.inbox.store.reading() as connection:
            found = list(effects(connection))
    counts: Counter[str] = Counter()
    states: dict[str, object] = {}
    for item in found:
        key, state = (item[0], item[1]) if isinstance(item, tuple) else (item, None)
        counts[str(key)] += 1
        if state is not None:
            states.setdefault(str(key), state)
    verdict = judge_effects(expected, counts, states)
    return _Outcome(verdict, [*verdict.problems(), *problems])


def _settle(harness: _CheckedHarness) -> None:
    """Process, moving the clock past each backoff and deferral, until nothing is open."""
    for _ in range(MAX_ROUNDS):
        harness.process()
        if not harness.open_events():
            return
        harness.clock.advance(STEP)


def _send(harness: _CheckedHarness, chunk: list[tuple[str, Body, dict[str, Any]]]) -> list[str]:
    """Send a batch at once; resend what was not acknowledged, as the provider would.
    Under Django the batch goes one delivery after another, on the test's connection."""
    problems = []
    concurrently = not harness.in_django
    for attempt in range(MAX_RESENDS):
        requests = [(source, *harness.sign(source, payload, **fields))
                    for source, payload, fields in chunk]  # fmt: skip
        answers = harness.send(requests, concurrently=concurrently)
        failed = [c for c, a in zip(chunk, answers, strict=True) if not a.ok]
        if not failed:
            return []
        if attempt == MAX_RESENDS - 1:
            statuses = sorted({a.status_code for a in answers if not a.ok})
            problems.append(f"{len(failed)} deliveries never acknowledged (answers {statuses})")
        chunk = failed
    return problems


# -- the search ----------------------------------------------------------------------------------


def _expected(expected: Collection[Hashable] | Mapping[Hashable, Any]) -> dict[str, str | None]:
    if isinstance(expected, Mapping):
        return {str(k): (None if v is None else str(v)) for k, v in expected.items()}
    return {str(k): None for k in expected}


def _name(spec: EventSpec, index: int) -> str:
    """`source:id (type)` when the payload names them, else `source#index`."""
    payload = spec[1]
    if not isinstance(payload, Mapping):
        return f"{spec[0]}#{index}"
    ident = next((payload[f] for f in ("id", "event_id") if isinstance(payload.get(f), str)), None)
    kind = payload.get("type") if isinstance(payload.get("type"), str) else None
    name = f"{spec[0]}:{ident}" if ident else f"{spec[0]}#{index}"
    return f"{name} ({kind})" if kind else name


@dataclass(frozen=True)
class Shape:
    events: int
    copies: int
    max_workers: int


def _worst_case(shape: Shape) -> Schedule:
    """Every copy at once, every first attempt dying, two workers: tried first."""
    order = tuple(i for _ in range(shape.copies) for i in range(shape.events))
    workers = min(2, shape.max_workers)
    return Schedule(order, (len(order),), (False,), frozenset(range(shape.events)), workers)


def _random_schedule(rng: random.Random, shape: Shape) -> Schedule:
    events = shape.events
    order = [i for i in range(events) for _ in range(shape.copies)]
    rng.shuffle(order)
    batches = []
    remaining = len(order)
    while remaining:
        size = rng.randint(1, min(remaining, 4))
        batches.append(size)
        remaining -= size
    return Schedule(
        tuple(order),
        tuple(batches),
        tuple(rng.random() < 0.5 for _ in batches),
        frozenset(i for i in range(events) if rng.random() < 0.5),
        rng.randint(1, shape.max_workers),
    )


Failure = tuple[Schedule, _Outcome] | None


def _sample(
    run: Callable[[Schedule], _Outcome], shape: Shape, examples: int, seed: int | None
) -> tuple[Failure, list[EffectsVerdict]]:
    rng = random.Random(seed)
    verdicts = []
    schedules = [_worst_case(shape)]
    schedules += [_random_schedule(rng, shape) for _ in range(examples - 1)]
    for schedule in schedules:
        outcome = run(schedule)
        verdicts.append(outcome.verdict)
        if not outcome.ok:
            return (schedule, outcome), verdicts
    return None, verdicts


def _hypothesis() -> Any:
    try:
        import hypothesis
    except ImportError:
        return None
    return hypothesis


def _search(
    hypothesis: Any,
    run: Callable[[Schedule], _Outcome],
    shape: Shape,
    examples: int,
    seed: int | None,
    shrink_budget: int,
) -> tuple[Failure, list[EffectsVerdict]]:
    st = hypothesis.strategies
    events, copies = shape.events, shape.copies
    failing: dict[Schedule, _Outcome] = {}
    raised: list[Schedule] = []
    searched_before_failure = [0]
    verdicts: list[EffectsVerdict] = []

    @st.composite  # type: ignore[untyped-decorator]
    def schedules(draw: Callable[[Any], Any]) -> Schedule:
        order = draw(st.permutations([i for i in range(events) for _ in range(copies)]))
        batches = []
        remaining = len(order)
        while remaining:
            size = draw(st.integers(1, min(remaining, 4)))
            batches.append(size)
            remaining -= size
        process_after = tuple(draw(st.booleans()) for _ in batches)
        crashes = frozenset(draw(st.sets(st.integers(0, events - 1))))
        return Schedule(
            tuple(order),
            tuple(batches),
            process_after,
            crashes,
            draw(st.integers(1, shape.max_workers)),
        )

    class _Failed(Exception):
        pass

    @hypothesis.settings(  # type: ignore[untyped-decorator]
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=seed is not None,
        suppress_health_check=list(hypothesis.HealthCheck),
        report_multiple_bugs=False,
        print_blob=False,
        verbosity=hypothesis.Verbosity.quiet,
    )
    @hypothesis.given(schedules())  # type: ignore[untyped-decorator]
    def check(schedule: Schedule) -> None:
        outcome = failing.get(schedule)  # hypothesis replaying what failed: not run again
        if outcome is None:
            if failing and len(verdicts) - searched_before_failure[0] > shrink_budget:
                return  # the shrinking budget is spent: the smallest failure so far stands
            outcome = run(schedule)
            verdicts.append(outcome.verdict)
            if not outcome.ok:
                searched_before_failure[0] = searched_before_failure[0] or len(verdicts)
                failing[schedule] = outcome
        if not outcome.ok:  # one place raises: hypothesis compares where failures come from
            raised.append(schedule)
            raise _Failed()

    # The worst case first, outside hypothesis: a failing explicit example is reported as it
    # stands, never shrunk, so it only stands in when the search finds nothing smaller.
    worst = _worst_case(shape)
    outcome = run(worst)
    verdicts.append(outcome.verdict)
    if seed is not None:
        check = hypothesis.seed(seed)(check)
    try:
        check()
    except _Failed:
        minimal = raised[-1]  # hypothesis replays the minimal example last
        return (minimal, failing[minimal]), verdicts
    return (None if outcome.ok else (worst, outcome)), verdicts
