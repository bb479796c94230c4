"""`Operations`: what operators and observers ask of an inbox's data, asked in one place.

The command line (`status`, `events`, `replay`, `prune`, `reconcile`, `dashboard`), the
dashboard, the gauges of a worker's `--metrics-port`, the worker's scheduled jobs, the demo
and the test kit ask here, never a store's gateways. So this is the one module among them
that knows an inbox keeps its data in exactly one store. Were it several (shards, a queue
database of its own), a listing would be merged here, a replay sent to the store that holds
its event, the figures summed, and one store chosen to keep the scheduled jobs' claims; none
of the callers would change.

Each method means what the gateway it asks means (its docstring says what): a read is one
reading transaction, a write one transaction, as there. What is this layer's own: the
snapshots a page or a scrape reads in one transaction (`overview`, `report`, `gauges`), what
a replay would do, read without a write (`would_replay`), and handing the pruner and
reconcile the parts of the store they work on.

Built once per store, where the store is built: `Runtime.operations` for an inbox,
`cli._target.opened` for the database an operator command reads, `dashboard_app` for a
store it is handed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from hookinbox._model import Event, Status
from hookinbox._operations._prune import PruneResult, Retentions, prune
from hookinbox._records import (
    Actor,
    Bucket,
    Cursor,
    EventFilter,
    Gauges,
    PauseChange,
    PausedSource,
    PayloadMatch,
    ReplayResult,
    Report,
    Selection,
    WorkerGroup,
)

if TYPE_CHECKING:
    from hookinbox._operations._pacing import Pacer
    from hookinbox._operations._reconcile import Reconciled, Takes
    from hookinbox._storage import Store
    from hookinbox.sources._base import Source
    from hookinbox.sources._provider_api import Limits, Listing

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One event and what happened to it: what `events show` and the event's page show."""

    event: Event
    deliveries: list[Row]
    """Every delivery of it, oldest first: when, whether a duplicate, whether a key conflict."""
    audit: list[Row]
    """The operators' actions on it (replays, erasure), oldest first."""
    messages: list[Row] = field(default_factory=list)
    """The outbox messages its handlers wrote, oldest first: read only when asked for."""

    @property
    def payload_erased(self) -> bool:
        """Whether its body and headers were erased (`expunge`, always audited): it then
        reads an empty body and no headers."""
        return any(row["action"] == "expunge" for row in self.audit)


@dataclass(frozen=True, slots=True)
class Overview:
    """The dashboard's first page, read in one snapshot."""

    report: Report
    activity: dict[str, list[Bucket]]
    """Per source, its buckets from the start asked for (`Stats.activity`)."""
    workers: list[WorkerGroup]


class Operations:
    """What operators and observers ask of one inbox's data (see the module's docstring)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    # -- events -------------------------------------------------------------------------------

    def list_events(
        self,
        filters: EventFilter,
        limit: int,
        *,
        before: Cursor | None = None,
        payload: PayloadMatch | None = None,
        mark_erased: bool = False,
    ) -> list[Row]:
        """Newest first, no bodies; a keyset page (`before`), searched in bodies (`payload`)
        among the newest `SCAN_LIMIT` matches of the rest (`Operator.list_events`); with
        `mark_erased`, each row's `payload_erased` says whether its payload was erased."""
        return self._store.operator.list_events(
            filters, limit, before=before, payload=payload, mark_erased=mark_erased
        )

    def count_events(self, filters: EventFilter) -> int:
        return self._store.operator.count_events(filters)

    def all_events(self, source: str | None = None) -> list[Event]:
        """Every stored event (of `source`), oldest first, bodies included: for test kits and
        small inboxes."""
        return self._store.operator.all_events(source)

    def event(self, source: str, event_id: str) -> Event | None:
        """The event stored under (source, event_id), as it is now."""
        return self._store.get_event(source, event_id)

    def event_record(
        self, source: str, event_id: str, *, with_messages: bool = False
    ) -> EventRecord | None:
        """The event with its deliveries and audit trail (and its outbox messages, if asked
        for); None when no such event is stored. Each part is read on its own."""
        event = self._store.get_event(source, event_id)
        if event is None:
            return None
        operator = self._store.operator
        deliveries = operator.delivery_history(source, event_id)
        messages = self._store.outbox.for_event(source, event_id) if with_messages else []
        audit = operator.audit_trail(source, event_id)
        return EventRecord(event, deliveries, audit, messages)

    def known_sources(self) -> list[str]:
        """Every source name with stored events (a scan of an index: for hints only)."""
        return self._store.operator.known_sources()

    def source_exists(self, source: str) -> bool:
        """Whether any event of `source` is stored (one index look-up)."""
        return self._store.operator.source_exists(source)

    # -- replays ------------------------------------------------------------------------------

    def replay_one(
        self, source: str, event_id: str, now: datetime, *, force: bool, actor: Actor
    ) -> tuple[ReplayResult, Status | None]:
        """Back to pending with its retry budget full again, and an audit row by `actor`;
        refused, with no write, when missing, held by a worker (never waited for), or
        processed without `force`. The result and the status it had."""
        return self._store.operator.replay_one(source, event_id, now, force=force, actor=actor)

    def would_replay(
        self, source: str, event_id: str, *, force: bool
    ) -> tuple[ReplayResult, Status | None]:
        """What `replay_one` would answer now, read without a write (a dry run): the same
        refusals, from the event as it is; the status it has."""
        event = self._store.get_event(source, event_id)
        if event is None:
            return ReplayResult.NOT_FOUND, None
        previous = event.status
        if previous is Status.PROCESSING:
            return ReplayResult.IN_PROGRESS, previous
        if previous is Status.PROCESSED and not force:
            return ReplayResult.NEEDS_FORCE, previous
        return ReplayResult.REPLAYED, previous

    def replay_matching(
        self, filters: EventFilter, now: datetime, *, actor: Actor, pacer: Pacer | None = None
    ) -> Iterator[int]:
        """Replay every event matching `filters` (a status other than processing), batch by
        batch, paced like the pruner (`_replay.replay_matching`), each replay audited; yields
        each batch's size. Only events that still match when their batch runs are touched."""
        from hookinbox._operations._replay import replay_matching

        return replay_matching(
            self._store.operator, self._store.housekeeping, filters, now, actor=actor, pacer=pacer
        )

    # -- erasure ------------------------------------------------------------------------------

    def expunge_one(
        self, source: str, event_id: str, now: datetime, *, actor: Actor | None
    ) -> bool | None:
        """Erase the event's body and headers (its key, status, times and delivery log are
        kept), audited by `actor`; never waits for a worker (`_storage/_erasure.py`). None
        when no such event is stored; whether a payload was erased (False: it was already).
        With `actor` None, a dry run: whether one would be, nothing written."""
        found = self._store.erasure.find_one(source, event_id)
        if found is None:
            return None
        row_id, kept = found
        if actor is None or not kept:
            return kept
        return bool(self._store.erasure.erase([row_id], now, actor))

    def expunge_matching(
        self,
        selection: Selection,
        now: datetime,
        *,
        actor: Actor | None,
        pacer: Pacer | None = None,
    ) -> Iterator[int]:
        """Erase the payloads of every event `selection` matches, in paced batches of at
        most `EXPUNGE_MAX_BATCH` events (`_expunge.expunge_matching`), each erasure audited;
        yields each batch's count. With `actor` None, a dry run counting the same way."""
        from hookinbox._operations._expunge import expunge_matching

        return expunge_matching(
            self._store.erasure, self._store.housekeeping, selection, now, actor=actor,
            pacer=pacer,
        )  # fmt: skip

    # -- paused sources -----------------------------------------------------------------------

    def pause(self, source: str, now: datetime, *, actor: Actor) -> PauseChange:
        """Pause `source`'s processing, audited by `actor`: its events are still stored, none
        is processed until `resume`. Once this returns no attempt at one of them starts; one
        that had claimed its event before ends first (`_storage/_pausing.py`). Pausing a
        paused source parks whatever is left of it."""
        return self._store.pausing.pause(source, now, actor)

    def resume(self, source: str, now: datetime, *, actor: Actor) -> PauseChange:
        """Resume `source`: its parked events due again (in batches), each processed once.
        Audited when it was paused; otherwise only what a resume cut short left parked is
        made due."""
        return self._store.pausing.resume(source, now, actor)

    def paused_sources(self) -> list[PausedSource]:
        """The paused sources, by name: who paused each, when, why."""
        return self._store.pausing.paused()

    def parked_count(self, source: str | None = None) -> int:
        """Events parked because their source is paused (of `source`)."""
        with self._store.reading() as connection:
            return self._store.pausing.parked_count(connection, source)

    # -- figures ------------------------------------------------------------------------------

    def report(self, now: datetime, *, full: bool = True) -> Report:
        """Everything `hookinbox status` shows, in one snapshot; without `full`, only the
        cheap figures (`status --check`: no scan of the events)."""
        with self._store.reading() as connection:
            return self._store.stats.report(connection, now, full=full)

    def activity(self, start: datetime, width: timedelta, buckets: int) -> dict[str, list[Bucket]]:
        """Per source, `buckets` buckets of `width` from `start`: deliveries, duplicates and
        failed events."""
        with self._store.reading() as connection:
            return self._store.stats.activity(connection, start, width, buckets)

    def overview(
        self, now: datetime, start: datetime, width: timedelta, buckets: int, worker_groups: int
    ) -> Overview:
        """The report, the activity from `start` and at most `worker_groups` groups of
        processes (by host and kind), in one snapshot."""
        with self._store.reading() as connection:
            stats = self._store.stats
            report = stats.report(connection, now)
            activity = stats.activity(connection, start, width, buckets)
            workers = self._store.liveness.groups(connection, worker_groups)
        return Overview(report, activity, workers)

    def gauges(self, now: datetime) -> Gauges:
        """What a metrics scrape reads, in one snapshot (`_metrics.GaugeSource`)."""
        return self._store.stats.gauges(now)

    # -- the dashboard's sessions -------------------------------------------------------------

    def session_revoked(self, session_id: str) -> bool:
        """Whether `session_id` was signed out (a primary-key read on every signed-in request)."""
        return self._store.operator.session_revoked(session_id)

    def revoke_session(self, session_id: str, *, expires_at: datetime, now: datetime) -> None:
        """Record `session_id` as signed out until `expires_at` (again is fine), forgetting
        revocations expired by `now`."""
        self._store.operator.revoke_session(session_id, expires_at=expires_at, now=now)

    # -- trust on first use ------------------------------------------------------------------

    def open_trust_window(self, source: str, length: timedelta) -> datetime:
        """Believe `source`'s next first handshake (Asana's `X-Hook-Secret`) for `length`;
        when the window closes (by the database's clock). It closes at the first one."""
        return self._store.trust.open_window(source, length)

    def close_trust_window(self, source: str) -> bool:
        """Close `source`'s window; whether one was open."""
        return self._store.trust.close_window(source)

    def forget_learned_secrets(self, source: str) -> int:
        """Drop the secrets `source` learned on first use; how many."""
        return self._store.trust.forget(source)

    def learned_secret_count(self, source: str) -> int:
        """How many secrets `source` learned (never the secrets)."""
        return len(self._store.trust.secrets(source))

    # -- housekeeping -------------------------------------------------------------------------

    def prune(
        self,
        *,
        now: datetime,
        retention: timedelta | Retentions,
        dry_run: bool = False,
        progress: Callable[[int], None] | None = None,
        stop: threading.Event | None = None,
    ) -> PruneResult:
        """Delete done events (with the delivery log and delivered messages) received before
        `now - retention`, paced by what the database says (`_prune.prune`); with `dry_run`,
        count them."""
        return prune(self._store.housekeeping, now=now, retention=retention, dry_run=dry_run,
                     progress=progress, stop=stop)  # fmt: skip

    def claim_job(self, name: str, slot: datetime, now: datetime) -> bool:
        """Claim the run of scheduled job `name` for the slot starting at `slot`: of every
        process asking for the same slot, exactly one is answered True."""
        return self._store.housekeeping.claim_job(name, slot, now)

    def record_job_result(self, name: str, result: str) -> None:
        self._store.housekeeping.record_job_result(name, result)

    def reconcile(
        self,
        source: Source,
        listing: Listing,
        *,
        since: timedelta,
        now: datetime,
        takes: Takes,
        dry_run: bool = False,
        limits: Limits | None = None,
        stop: threading.Event | None = None,
    ) -> Reconciled:
        """List `source`'s events from its provider's API and store those a handler takes and
        the inbox lacks (`_reconcile.reconcile`), stored as a delivery's are."""
        from hookinbox._operations._reconcile import reconcile

        return reconcile(self._store.ingest, source, listing, since=since, now=now, takes=takes,
                         dry_run=dry_run, limits=limits, stop=stop)  # fmt: skip

    def empty(self) -> None:
        """Delete every row of hookinbox's tables but the schema's version (a test's fresh
        start where the tables cannot be dropped)."""
        self._store.housekeeping.empty()
