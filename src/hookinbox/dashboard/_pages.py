"""The pages an operator reads: the overview, the charts, the event list, an event, the
replays' confirmations, and the error page.

Each reads the inbox's data off the event loop, within the dashboard's cap
(`Dashboard.off_loop`), through the same operations as `hookinbox status`, `events` and
`replay`, and renders a template; none changes anything (the replays themselves are
`_actions.py`'s).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from hookinbox._errors import ConfigurationError, StoreUnavailable
from hookinbox._operations import breached_figures
from hookinbox._records import SCAN_LIMIT, Bucket
from hookinbox.dashboard._auth import Session
from hookinbox.dashboard._chart import WINDOWS, percent, time_chart
from hookinbox.dashboard._context import Dashboard, utc_now
from hookinbox.dashboard._forms import (
    SELECTION_FIELDS,
    bad_request,
    encode_cursor,
    event_key,
    filter_fields,
    parse_cursor,
    parse_filters,
    parse_search,
    parse_selection,
    replayable,
    selection_fields,
)

PAGE_SIZE = 50
SAMPLE = 5
"""Events a bulk replay's confirmation lists (newest first) beside its count."""

WORKER_GROUPS = 50
"""Hosts-and-kinds listed on the overview; `hookinbox status` counts every one."""


def _ratio(buckets: Sequence[Bucket]) -> float:
    """The duplicate ratio of several sources' buckets together."""
    deliveries = sum(b.deliveries for b in buckets)
    return sum(b.duplicates for b in buckets) / deliveries if deliveries else 0.0


def pretty_body(payload: Callable[[], Any], body: bytes) -> str:
    try:
        return json.dumps(payload(), indent=2, ensure_ascii=False, default=str, sort_keys=True)
    except ValueError:  # neither JSON nor a form: shown as text
        return body.decode("utf-8", "replace")


_STYLESHEET = resources.files("hookinbox.dashboard").joinpath("static/dashboard.css").read_bytes()


def _erasable(fields: dict[str, str]) -> dict[str, str]:
    """The list's filters a bulk erasure takes too (its link carries them): source, until."""
    return {name: fields[name] for name in ("source", "until") if name in fields}


class Pages:
    def __init__(self, dashboard: Dashboard) -> None:
        self.dashboard = dashboard
        self.operations = dashboard.operations
        self.sessions = dashboard.sessions

    async def overview(self, request: Request, session: Session) -> Response:
        now = utc_now()

        window = WINDOWS["24h"]
        start = window.start(now)
        read = await self.dashboard.off_loop(
            self.operations.overview, now, start, window.width, window.buckets, WORKER_GROUPS + 1
        )
        figures, buckets, processes = read.report, read.activity, read.workers
        ratios = [
            _ratio([per_source[i] for per_source in buckets.values()])
            for i in range(window.buckets)
        ]
        day = figures.duplicates["last day"].deliveries
        title = (
            "Duplicate ratio per hour over the last 24 hours, every source "
            f"({day} deliveries in the last day)"
        )
        counts: dict[tuple[str, str], int] = figures.counts
        return self.dashboard.render(
            request,
            "overview.html",
            session,
            now=now,
            figures=figures,
            sources=sorted({source for source, _ in counts} | set(self.dashboard.sources)),
            counts=counts,
            breached=breached_figures(figures.open, now, self.dashboard.thresholds),
            chart=time_chart(title, start, window, ratios, line=True, unit=percent, floor=0.01),
            processes=processes[:WORKER_GROUPS],
            more_processes=len(processes) > WORKER_GROUPS,
        )

    async def charts(self, request: Request, session: Session) -> Response:
        """Volume, failures and the duplicate ratio per source, over 24 hours or 7 days."""
        now = utc_now()
        key = request.query_params.get("window", "24h")
        if key not in WINDOWS:
            raise bad_request(f"window is one of {', '.join(WINDOWS)}")
        window = WINDOWS[key]
        start = window.start(now)

        buckets = await self.dashboard.off_loop(
            self.operations.activity, start, window.width, window.buckets
        )
        by_source = []
        for source, series in buckets.items():
            volume = [float(b.deliveries) for b in series]
            failed = [float(b.failed) for b in series]
            ratio = [b.duplicate_ratio for b in series]
            by_source.append((source, [
                ("volume", time_chart(f"Deliveries ({sum(volume):.0f})", start, window, volume)),
                ("failures", time_chart(f"Events received then, failed now ({sum(failed):.0f})",
                                        start, window, failed)),
                ("duplicates", time_chart("Duplicate ratio", start, window, ratio, line=True,
                                          unit=percent, floor=0.01)),
            ]))  # fmt: skip
        return self.dashboard.render(
            request, "charts.html", session,
            window=window, windows=WINDOWS, start=start, by_source=by_source,
        )  # fmt: skip

    async def event_list(self, request: Request, session: Session) -> Response:
        filters = parse_filters(request.query_params, utc_now())
        before_text = request.query_params.get("before")
        before = parse_cursor(before_text) if before_text else None
        search = parse_search(request.query_params)
        rows = await self.dashboard.off_loop(
            lambda: self.operations.list_events(
                filters, PAGE_SIZE + 1, before=before, payload=search, mark_erased=True
            )
        )
        older = encode_cursor(rows[PAGE_SIZE - 1]) if len(rows) > PAGE_SIZE else None
        fields = filter_fields(filters)
        searched = {"path": ".".join(search.path), "equals": search.value} if search else {}
        return self.dashboard.render(
            request,
            "events.html",
            session,
            rows=rows[:PAGE_SIZE],
            erase_fields={**_erasable(fields), **searched},
            filters=filters,
            fields=fields,
            searched=searched,
            scan_limit=SCAN_LIMIT,
            older=older,
            first_page=before is None,
        )

    async def event_detail(self, request: Request, session: Session) -> Response:
        source, event_id = event_key(request.query_params)

        record = await self.dashboard.off_loop(
            lambda: self.operations.event_record(source, event_id, with_messages=True)
        )
        if record is None:
            raise HTTPException(404, f"no event {source} {event_id}")
        event = record.event
        return self.dashboard.render(
            request,
            "event.html",
            session,
            event=event,
            body=pretty_body(lambda: event.payload, event.body),
            headers=json.dumps(event.headers, indent=2, sort_keys=True),
            history=record.deliveries,
            messages=record.messages,
            trail=record.audit,
            erased=record.payload_erased,
            done=request.query_params.get("done"),
        )

    async def replay_confirm(self, request: Request, session: Session) -> Response:
        source, event_id = event_key(request.query_params)
        event = await self.dashboard.off_loop(self.operations.event, source, event_id)
        if event is None:
            raise HTTPException(404, f"no event {source} {event_id}")
        return self.dashboard.render(request, "replay_one.html", session, event=event)

    async def bulk_confirm(self, request: Request, session: Session) -> Response:
        """The dry run: how many events the filter matches now, the newest few, and the form
        that replays them."""
        filters = replayable(parse_filters(request.query_params, utc_now()))
        count = await self.dashboard.off_loop(self.operations.count_events, filters)
        sample = await self.dashboard.off_loop(self.operations.list_events, filters, SAMPLE)
        return self.dashboard.render(
            request, "replay_bulk.html", session, filters=filters, status=filters.status,
            fields=filter_fields(filters), count=count, sample=sample, replayed=None,
        )  # fmt: skip

    async def erase_confirm(self, request: Request, session: Session) -> Response:
        """The bulk erasure's dry run: the form choosing its events and, once it names a
        source and a filter, how many payloads the erasure would delete (counted the way it
        goes, batch by batch, nothing written) and the form that erases them."""
        params = request.query_params
        now = utc_now()
        selection = parse_selection(params, now)
        typed = {name: params.get(name, "") for name in SELECTION_FIELDS}
        if selection is None:
            return self.dashboard.render(
                request, "expunge_bulk.html", session, typed=typed, fields={}, count=None,
                known=True, erased=None,
            )  # fmt: skip
        operations = self.operations

        def count() -> tuple[int, bool]:
            total = sum(operations.expunge_matching(selection, now, actor=None))
            known = bool(total) or selection.source in self.dashboard.sources
            return total, known or operations.source_exists(selection.source)

        total, known = await self.dashboard.off_loop(count)
        return self.dashboard.render(
            request, "expunge_bulk.html", session, typed=typed, fields=selection_fields(selection),
            count=total, known=known, erased=None,
        )  # fmt: skip

    async def stylesheet(self, _request: Request) -> Response:
        return Response(_STYLESHEET, media_type="text/css")

    async def error(self, request: Request, exc: Exception) -> Response:
        if isinstance(exc, StoreUnavailable):
            status, message = 503, f"database unavailable: {exc}"
        elif isinstance(exc, ConfigurationError):  # an event no encryption key decrypts
            status, message = 500, str(exc)
        else:
            assert isinstance(exc, HTTPException)
            status, message = exc.status_code, str(exc.detail)
        session = self.sessions.read(request)
        response = self.dashboard.render(
            request, "error.html", session, status, code=status, message=message
        )
        if isinstance(exc, HTTPException) and exc.headers:
            response.headers.update(exc.headers)  # Retry-After of a 429
        return response
