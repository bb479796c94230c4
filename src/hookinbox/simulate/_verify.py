"""The exactly-once check: compare a run's ledger with what the receiver's database holds.

Two places are read, whichever exist:
- hookinbox's own `hookinbox_events` (when the receiver is hookinbox): each acknowledged event
  stored once and processed, and how many duplicate deliveries its rows absorbed;
- the receiver's business table, through `effects_sql`: a query returning one row per applied
  effect, the effect key first (for Stripe, the payment intent) and optionally the object's
  final state second (the subscription status), for any receiver at all.

Reading never writes: nothing is created in a database that has no hookinbox tables, SQLite is
opened read-only, and every query (the user's too) runs in a read-only transaction. Run it
after processing has finished (`wait_until_drained`): an event still deferred behind its
predecessor is not lost, only late.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._errors import ConfigurationError
from hookinbox._exactly_once import judge_effects
from hookinbox._model import DONE_STATUSES, WAITING_STATUSES, Status
from hookinbox._storage import dialect_for_url, parse_url, translate_errors
from hookinbox.simulate._report import SimulationReport

SHOP_EFFECTS_SQL = (
    "SELECT o.payment_id, s.status FROM shop_orders o "
    "LEFT JOIN shop_subscriptions s ON s.customer_id = o.customer_id"
)
"""The bundled example shop: one row per order, with its customer's subscription status.
The default for Stripe when the shop's tables exist."""
OPEN_STATUSES = tuple(s.value for s in (*WAITING_STATUSES, Status.PROCESSING))
# The receiver's documented table (docs/storage.md), read as a client reads it: the receiver may
# run another hookinbox version, so nothing of this one's storage modules is assumed.
events = sa.table(
    "hookinbox_events",
    sa.column("event_id", sa.String),
    sa.column("status", sa.String),
    sa.column("delivery_count", sa.Integer),
    sa.column("received_at", sa.DateTime(timezone=True)),
)
PROCESSED = frozenset(s.value for s in DONE_STATUSES)
CHUNK = 500
"""Keys per `IN (...)`: well under every driver's limit on bound parameters."""
CLOCK_MARGIN = timedelta(minutes=1)


@dataclass(frozen=True)
class Verification:
    expected: int
    """Valid events answered 2xx at least once."""
    processed: int | None
    """Of those, how many hookinbox processed (None: no hookinbox tables to read)."""
    duplicates_absorbed: int | None
    """Deliveries of those events beyond the first, as hookinbox's rows counted them."""
    effects_expected: int | None
    effects_found: int | None
    """Expected effects present at least once (None: no effects query ran)."""
    lost: int
    """Acknowledged events that left no stored row or no effect."""
    doubled: int
    """Extra copies: effect rows beyond the first per key, and stored rows beyond the first."""
    invalid_accepted: int
    """Forged, expired or malformed events answered 2xx, stored or applied."""
    states_checked: int
    states_wrong: int
    """Final states (the effects query's second column) that differ from the last update."""
    checked: tuple[str, ...]
    """What could be read: `hookinbox_events`, `effects`."""
    problems: tuple[str, ...]
    """One line per failed check; empty when everything holds."""
    notes: tuple[str, ...] = ()
    """What weakens the check without failing it (events stored by an earlier run)."""

    @property
    def ok(self) -> bool:
        return bool(self.checked) and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "expected": self.expected,
            "processed": self.processed,
            "duplicates_absorbed": self.duplicates_absorbed,
            "effects_expected": self.effects_expected,
            "effects_found": self.effects_found,
            "lost": self.lost,
            "doubled": self.doubled,
            "invalid_accepted": self.invalid_accepted,
            "states_checked": self.states_checked,
            "states_wrong": self.states_wrong,
            "checked": list(self.checked),
            "problems": list(self.problems),
            "notes": list(self.notes),
            "ok": self.ok,
        }


def _engine(database_url: str) -> sa.Engine:
    """An engine that can only read the receiver's database.

    PostgreSQL goes through hookinbox's `Store` (its driver, pool and timeouts; the schema is
    never migrated). SQLite is opened read-only instead: `Store` switches every file it opens
    to WAL journaling, a persistent change not to be made to a user's database by a check.
    """
    url = parse_url(database_url)
    return dialect_for_url(url).read_only_engine(url)


@contextmanager
def _reading(engine: sa.Engine) -> Iterator[Connection]:
    """A read-only transaction: the user's --effects-sql cannot change anything either."""
    with translate_errors(), engine.connect() as connection:
        connection.execution_options(postgresql_readonly=True)
        with connection.begin():
            yield connection


def _has_inbox(connection: Connection) -> bool:
    return sa.inspect(connection).has_table(events.name)


def check_database(database_url: str) -> None:
    """Connect to the receiver's database and read from it once, as `verify` will.

    Before a run sends anything: a missing driver (`MissingExtra`), a URL or SQLite file that
    cannot be read (`ConfigurationError`), or a database that does not answer
    (`StoreUnavailable`) is then one line at once, not the end of a run whose deliveries were
    all sent (and, by a real receiver, stored) for a check that could never happen.
    """
    engine = _engine(database_url)
    try:
        with _reading(engine) as connection:
            connection.execute(sa.select(sa.literal(1)))
    finally:
        engine.dispose()


def wait_until_drained(
    database_url: str,
    timeout: float,
    *,
    since: datetime | None = None,
    interval: float = 0.2,
) -> bool:
    """Poll hookinbox_events until no event is pending, processing or deferred.

    Deferred events wait for a predecessor (NotReady); with the default retry policy their
    first retry comes 5 s later, so a run drains within about 30 s. `since` (the run's start)
    ignores older events, such as a previous run's leftovers. False on timeout; True at once
    when the database has no hookinbox tables (nothing there to wait for).
    """
    engine = _engine(database_url)
    query = sa.select(sa.func.count()).select_from(events).where(events.c.status.in_(OPEN_STATUSES))
    if since is not None:
        query = query.where(events.c.received_at >= since - CLOCK_MARGIN)
    deadline = time.monotonic() + timeout
    try:
        while True:
            with _reading(engine) as connection:
                if not _has_inbox(connection):
                    return True
                if not connection.execute(query).scalar_one():
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval)
    finally:
        engine.dispose()


def _chunks(keys: Iterable[str]) -> Iterator[list[str]]:
    ordered = sorted(keys)
    for start in range(0, len(ordered), CHUNK):
        yield ordered[start : start + CHUNK]


def _inbox_rows(connection: Connection, keys: Iterable[str]) -> dict[str, list[tuple[str, int]]]:
    """Event id -> (status, delivery_count) of each stored row, for the given keys."""
    found: dict[str, list[tuple[str, int]]] = {}
    columns = (events.c.event_id, events.c.status, events.c.delivery_count)
    for chunk in _chunks(keys):
        for event_id, status, count in connection.execute(
            sa.select(*columns).where(events.c.event_id.in_(chunk))
        ):
            found.setdefault(event_id, []).append((status, count))
    return found


def _effect_rows(
    connection: Connection, sql: str, wanted: frozenset[str]
) -> tuple[Counter[str], dict[str, object]]:
    """Rows per wanted effect key, and the state column of the first row per key (if any)."""
    counts: Counter[str] = Counter()
    states: dict[str, object] = {}
    try:
        result = connection.execute(sa.text(sql))
    except sa.exc.DBAPIError as error:  # the user's SQL: a usage error, not an outage
        detail = str(error.orig).strip().splitlines()[0] if str(error.orig).strip() else ""
        raise ConfigurationError(f"the effects query failed: {detail}") from error
    for row in result:
        key = str(row[0])
        if key not in wanted:
            continue  # the receiver's other rows: not ours to judge
        counts[key] += 1
        if len(row) > 1:
            states.setdefault(key, row[1])
    return counts, states


def verify(
    report: SimulationReport, database_url: str, *, effects_sql: str | None = None
) -> Verification:
    """Check the receiver's database against the run's ledger (see the module docstring).

    `effects_sql` defaults, for Stripe, to the example shop's orders when that table exists.
    """
    wanted = report.planned_effects | frozenset(
        e for e in report.invalid_events.values() if e is not None
    )
    engine = _engine(database_url)
    try:
        with _reading(engine) as connection:
            inspector = sa.inspect(connection)
            has_inbox = inspector.has_table(events.name)
            if effects_sql is None and report.provider == "stripe":
                if all(inspector.has_table(t) for t in ("shop_orders", "shop_subscriptions")):
                    effects_sql = SHOP_EFFECTS_SQL
            inbox = (
                _inbox_rows(connection, report.acknowledged | report.invalid_events.keys())
                if has_inbox
                else None
            )
            effects = _effect_rows(connection, effects_sql, wanted) if effects_sql else None
    finally:
        engine.dispose()
    return judge(report, inbox, effects)


def judge(
    report: SimulationReport,
    inbox: dict[str, list[tuple[str, int]]] | None,
    effects: tuple[Counter[str], dict[str, object]] | None,
) -> Verification:
    """The verdict from what was read (pure: no database)."""
    problems: list[str] = []
    notes: list[str] = []
    checked: list[str] = []
    lost_events: set[str] = set()
    doubled = 0
    processed = absorbed = effects_found = None
    states_checked = states_wrong = 0
    traces: set[str] = set(report.invalid_answered_2xx)

    if inbox is not None:
        checked.append("hookinbox_events")
        stored = [key for key in report.acknowledged if key in inbox]
        lost_events |= report.acknowledged - set(stored)
        doubled += sum(len(inbox[key]) - 1 for key in stored)
        statuses: Counter[str] = Counter(status for key in stored for status, _ in inbox[key][:1])
        processed = sum(statuses[s] for s in PROCESSED)
        absorbed = sum(count for key in stored for _, count in inbox[key]) - len(stored)
        unprocessed = {s: n for s, n in statuses.items() if s not in PROCESSED}
        if unprocessed:
            detail = ", ".join(f"{s} {n}" for s, n in sorted(unprocessed.items()))
            problems.append(
                f"{sum(unprocessed.values())} acknowledged events not processed ({detail})"
            )
        traces |= {key for key in report.invalid_events if key in inbox}
        if absorbed + len(stored) > report.reached:
            notes.append(
                "the database held these events before this run (the same --seed again?): "
                "they were duplicates, so the check proves little; use a new seed"
            )

    if effects is not None:
        checked.append("effects")
        counts, states = effects
        verdict = judge_effects(
            report.expected_effects, counts, states, judged=report.planned_effects
        )
        effects_found = verdict.found
        lost_events |= {e for e, key in report.effect_of.items() if key in verdict.missing}
        doubled += verdict.extra_copies
        states_checked = verdict.states_checked
        states_wrong = len(verdict.states_wrong)
        traces |= {k for k, e in report.invalid_events.items() if e is not None and counts[e]}

    if lost_events:
        problems.append(f"{len(lost_events)} acknowledged events lost (no stored row or effect)")
    if doubled:
        problems.append(f"{doubled} effects or rows doubled (applied more than once)")
    if states_wrong:
        problems.append(
            f"{states_wrong} of {states_checked} final states wrong (an older update won)"
        )
    if traces:
        problems.append(f"{len(traces)} forged, expired or malformed events accepted")
    if not checked:
        problems.append(
            "nothing could be verified: no hookinbox tables and no effects query (--effects-sql)"
        )
    return Verification(
        expected=len(report.acknowledged),
        processed=processed,
        duplicates_absorbed=absorbed,
        effects_expected=len(report.expected_effects) if effects is not None else None,
        effects_found=effects_found,
        lost=len(lost_events),
        doubled=doubled,
        invalid_accepted=len(traces),
        states_checked=states_checked,
        states_wrong=states_wrong,
        checked=tuple(checked),
        problems=tuple(problems),
        notes=tuple(notes),
    )
