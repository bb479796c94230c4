"""Retention per source: a source keeps its events longer or shorter than the inbox, the
prune deletes each source's by its own cutoff, in batches that read a bounded number of rows."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from hookinbox import ConfigurationError, Inbox, Status
from hookinbox._operations import prune
from hookinbox._operations._pacing import Pacer
from hookinbox._operations._prune import Retentions
from hookinbox._records import Pressure
from hookinbox._storage import Cutoffs, Store, Sweep
from hookinbox._storage._housekeeping import Housekeeping
from hookinbox._storage._schema import deliveries, events
from hookinbox.sources import GitHub, Shopify, Stripe
from tests.operations.test_prune import pruned_under_load
from tests.support.signing import stripe_delivery

SECRET = "whsec_retention"

NOW = datetime.now(UTC)
AGES = (5, 20, 120, 400)
"""Days: each source has a done event (and a log row) of each age."""
RETENTIONS = Retentions(
    timedelta(days=90), {"stripe": timedelta(days=365), "shopify": timedelta(days=10)}
)


def add(store: Store, rows: list[tuple[str, str, int, Status]]) -> None:
    """(source, event id, age in days, status): an event and its log row each."""
    body = b"{}"
    with store.transaction() as connection:
        for start in range(0, len(rows), 5_000):
            chunk = rows[start : start + 5_000]
            at = [NOW - timedelta(days=age, seconds=n) for n, (_, _, age, _) in enumerate(chunk)]
            connection.execute(
                events.insert(),
                [
                    {"source": source, "event_id": event_id, "event_type": "t",
                     "occurred_at": when, "received_at": when, "body": body, "headers": "{}",
                     "body_sha256": hashlib.sha256(body).hexdigest(), "status": status.value,
                     "attempts": 1, "deferrals": 0, "next_attempt_at": when,
                     "delivery_count": 1, "key_conflicts": 0, "last_delivery_at": when}
                    for (source, event_id, _, status), when in zip(chunk, at, strict=True)
                ],
            )  # fmt: skip
            connection.execute(
                deliveries.insert(),
                [
                    {"source": source, "event_id": event_id, "received_at": when,
                     "duplicate": False, "key_conflict": False}
                    for (source, event_id, _, _), when in zip(chunk, at, strict=True)
                ],
            )  # fmt: skip
        connection.exec_driver_sql("DELETE FROM hookinbox_event_queue")


def kept(store: Store, table: sa.Table = events) -> set[tuple[str, str]]:
    with store.engine.connect() as connection:
        return {
            (row.source, row.event_id)
            for row in connection.execute(sa.select(table.c.source, table.c.event_id))
        }


def every_age(status: Status = Status.PROCESSED) -> list[tuple[str, str, int, Status]]:
    return [
        (source, f"{source}_{age}", age, status)
        for source in ("stripe", "github", "shopify")
        for age in AGES
    ]


def test_each_source_is_pruned_by_its_own_retention(store: Store) -> None:
    add(store, [*every_age(), ("github", "github_failed", 400, Status.FAILED)])
    expected = {
        ("stripe", "stripe_5"), ("stripe", "stripe_20"), ("stripe", "stripe_120"),  # 365d
        ("github", "github_5"), ("github", "github_20"),  # the inbox's 90d
        ("shopify", "shopify_5"),  # 10d
    }  # fmt: skip

    dry_run = prune(store.housekeeping, now=NOW, retention=RETENTIONS, dry_run=True)
    result = prune(store.housekeeping, now=NOW, retention=RETENTIONS)

    assert kept(store) == expected | {("github", "github_failed")}  # never pruned, however old
    assert kept(store, deliveries) == expected  # the log by its own time, each source's
    assert (result.events, result.deliveries) == (6, 7)
    assert (dry_run.events, dry_run.deliveries) == (result.events, result.deliveries)


def test_one_retention_prunes_as_before(store: Store) -> None:
    add(store, every_age())
    result = prune(store.housekeeping, now=NOW, retention=timedelta(days=90))
    assert result.events == 6
    assert {age for _, event_id in kept(store) for age in [int(event_id.split("_")[1])]} == {
        5,
        20,
    }


class Observed(Housekeeping):
    """The store's housekeeping, recording what each batch read in the window and deleted."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.batches: list[tuple[int, int, int]] = []  # (the pacer's rows, read, deleted)

    def prune_batch(
        self, cutoff: datetime | Cutoffs | Sweep, batch_size: int
    ) -> tuple[int, int, int]:
        assert isinstance(cutoff, Sweep)
        deleted = super().prune_batch(cutoff, batch_size)
        self.batches.append((batch_size, cutoff.read, deleted[0]))
        return deleted


def test_a_window_batch_reads_at_most_a_batch_of_rows_however_many_are_kept(
    store: Store,
) -> None:
    """3,000 Stripe events kept for a year between the inbox's cutoff and Stripe's, 300 of
    another source's among them to delete: no batch reads more than the pacer's rows, and the
    window is read once."""
    add(
        store,
        [("stripe", f"keep_{n}", 120, Status.PROCESSED) for n in range(3_000)]
        + [("github", f"drop_{n}", 120, Status.PROCESSED) for n in range(300)],
    )
    housekeeping = Observed(store)

    class Fixed(Pacer):
        def next_pause(self, rows_done: int, took: float, pressure: Pressure) -> float:
            return 0.0  # rows stay 200: the bound observed is the batch's, not the pacer's

    result = prune(housekeeping, now=NOW, retention=RETENTIONS, pacer=Fixed(rows=200))

    assert result.events == 300
    assert {source for source, _ in kept(store)} == {"stripe"} and len(kept(store)) == 3_000
    assert all(read <= rows for rows, read, _ in housekeeping.batches)
    # Read once: 3,300 rows of the window in batches of 200 (17), not once per source.
    assert sum(read for _, read, _ in housekeeping.batches) <= 2 * 3_300 + 200
    assert len(housekeeping.batches) <= 2 * (3_300 // 200 + 2)


def test_an_inbox_prunes_each_source_by_its_own_retention(db_url: str) -> None:
    inbox = Inbox(db_url, retention=timedelta(days=90))
    inbox.add_source(Stripe(secret="whsec_x"), retention=timedelta(days=365))
    inbox.add_source(GitHub(secret="x"))
    inbox.add_source(Shopify(secret="x"), retention=timedelta(days=10))
    inbox.migrate()
    add(inbox.store, every_age())
    assert inbox.retentions.describe(inbox.sources) == {
        "github": "90d", "shopify": "10d", "stripe": "365d"
    }  # fmt: skip
    result = inbox.prune()
    assert result.events == 6
    assert ("stripe", "stripe_120") in kept(inbox.store)
    assert ("github", "github_120") not in kept(inbox.store)
    inbox.close()


def test_a_source_s_retention_shorter_than_its_window_is_refused_unless_forced() -> None:
    inbox = Inbox("sqlite:///x.db", retention=timedelta(days=365))
    with pytest.raises(ConfigurationError) as refused:
        inbox.add_source(Stripe(secret="whsec_x"), retention=timedelta(days=7))
    assert str(refused.value) == (
        "stripe's retention 7d is shorter than stripe's redelivery window (30d): a redelivery "
        "after pruning would be processed again; use a longer retention or --force"
    )
    assert "stripe" not in inbox.sources
    inbox.add_source(
        Stripe(secret="whsec_x"), retention=timedelta(days=7), allow_short_retention=True
    )
    assert inbox.retentions.for_source("stripe") == timedelta(days=7)
    # A source may keep its events longer than a too-short inbox default: it is its own.
    short = Inbox("sqlite:///x.db", retention=timedelta(days=7), allow_short_retention=True)
    short.add_source(Stripe(secret="whsec_x"), retention=timedelta(days=30))
    for wrong in (timedelta(0), timedelta(days=-1), timedelta(days=40_000), 30):
        with pytest.raises(ConfigurationError, match="retention must be a positive timedelta"):
            Inbox("sqlite:///x.db").add_source(GitHub(secret="x"), retention=wrong)  # type: ignore[arg-type]


@pytest.mark.slow  # runs the `hookinbox` command: not in `make test-fast`
def test_a_source_kept_longer_lists_its_retention_and_keeps_its_old_events(db_url: str) -> None:
    """`hookinbox prune --dry-run` with an APP whose Stripe keeps 400 days: each source's
    retention is listed, and the prune deletes GitHub's 120-day-old event only."""
    from tests.cli.conftest import hookinbox

    store = Store(db_url)
    store.migrate()
    add(store, [("stripe", "old", 120, Status.PROCESSED), ("github", "old", 120, Status.PROCESSED)])
    app = "tests.apps.kept_longer:inbox"

    dry_run = hookinbox("prune", app, "--database-url", db_url, "--dry-run")
    pruned = hookinbox("prune", app, "--database-url", db_url, "--json")

    assert (dry_run.returncode, dry_run.stderr) == (0, "")
    assert dry_run.stdout.splitlines() == [
        "would delete 1 events, 1 delivery log rows and 0 delivered outbox messages older than "
        "90d (or their source's own retention)",
        "  github: kept 90d (the inbox's)",
        "  stripe: kept 400d",
    ]
    assert pruned.returncode == 0, pruned.stderr
    report = json.loads(pruned.stdout)
    assert report["retention_by_source"] == {"github": "90d", "stripe": "400d"}
    assert (report["events"], report["deliveries"]) == (1, 1)
    assert kept(store) == kept(store, deliveries) == {("stripe", "old")}
    store.dispose()


def test_an_event_older_than_the_inbox_s_retention_but_not_its_source_s_is_not_stale(
    db_url: str,
) -> None:
    inbox = Inbox(db_url, retention=timedelta(days=90))
    inbox.add_source(Stripe(secret=SECRET), retention=timedelta(days=365))
    inbox.add_source(Stripe(secret=SECRET, name="connect"))
    created = int((NOW - timedelta(days=100)).timestamp())
    event = {"id": "evt_1", "type": "invoice.paid", "created": created, "data": {"object": {}}}
    for source in ("stripe", "connect"):
        headers, body = stripe_delivery(event, SECRET)
        assert inbox.receive(source, headers, body).status_code == 200
    assert inbox.store.get_event("stripe", "evt_1").status is Status.PENDING  # type: ignore[union-attr]
    assert inbox.store.get_event("connect", "evt_1").status is Status.STALE  # type: ignore[union-attr]
    inbox.close()


@pytest.mark.slow
def test_a_window_prune_keeps_ingest_answering(db_url: str) -> None:
    """10,000 old events, half of them kept for a longer retention, half to delete among them:
    the window's batches, each reading at most a batch, run while a server takes deliveries,
    and not one delivery is answered 503."""
    store = Store(db_url)
    store.migrate()
    add(
        store,
        [("stripe", f"keep_{n}", 120, Status.PROCESSED) for n in range(5_000)]
        + [("connect", f"drop_{n}", 120, Status.PROCESSED) for n in range(5_000)],
    )
    result, statuses = pruned_under_load(db_url, store, RETENTIONS_STRIPE_LONGER)
    assert result.events == 5_000
    assert len(statuses) >= 200 and set(statuses) == {200}
    with store.reading() as connection:
        left = dict(
            connection.execute(
                sa.select(events.c.source, sa.func.count()).group_by(events.c.source)
            ).all()
        )
    assert left == {"stripe": 5_000 + len(statuses)}  # the kept ones and the new deliveries
    store.dispose()


RETENTIONS_STRIPE_LONGER = Retentions(timedelta(days=90), {"stripe": timedelta(days=365)})
