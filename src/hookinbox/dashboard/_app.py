"""The operator dashboard: an ASGI app of server-rendered pages over the operator queries.

Every figure comes from the same storage functions as `hookinbox status`, `events` and `replay`;
this module only parses requests, checks the session and renders templates. Pages work without
JavaScript (there is none); state changes are POST forms carrying a CSRF token.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import anyio.to_thread
import jinja2
from anyio import CapacityLimiter
from starlette.applications import Starlette
from starlette.datastructures import FormData, QueryParams, UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hookinbox._errors import ConfigurationError, StoreUnavailable
from hookinbox._model import Status
from hookinbox._operations import Thresholds, breached_figures, parse_time
from hookinbox._records import (
    SCAN_LIMIT,
    Actor,
    Bucket,
    Cursor,
    EventFilter,
    PayloadMatch,
    ReplayResult,
    search_for,
)
from hookinbox._storage import Store
from hookinbox._text import printable
from hookinbox.dashboard._auth import (
    COOKIE,
    SESSION_SECONDS,
    Session,
    Sessions,
    SignInLimiter,
    client_address,
    cross_site,
    csrf_matches,
    mount_path,
)
from hookinbox.dashboard._chart import WINDOWS, percent, time_chart

PAGE_SIZE = 50
URLENCODED = "application/x-www-form-urlencoded"
T = TypeVar("T")
Handler = Callable[[Request], Awaitable[Response]]

SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'none'; style-src 'self'; img-src 'self'; "
     b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]  # fmt: skip
"""No page may be framed (clickjacking a replay button), cached, or load anything foreign."""


def _printable(value: Any) -> Any:
    """Every `{{ ... }}` passes here: a body, header, error or reason may hold a lone
    surrogate or a NUL, which would make the page unencodable (a 500), or a bidi override
    (U+202E) that would show what follows it reversed; they are shown escaped instead, with
    every other control character (`hookinbox._text.printable`)."""
    if not isinstance(value, str):
        return value
    if hasattr(value, "__html__"):  # markup already escaped (the chart): keep it markup
        return type(value)(printable(str(value)))
    return printable(value)


_templates = jinja2.Environment(
    loader=jinja2.PackageLoader("hookinbox.dashboard", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    finalize=_printable,
)


def _now() -> datetime:
    return datetime.now(UTC)


def _age(since: datetime | None, now: datetime) -> str:
    if since is None:
        return "-"
    seconds = (now - since).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


_templates.filters["age"] = _age
_templates.filters["when"] = lambda t: "-" if t is None else t.strftime("%Y-%m-%d %H:%M:%S")


OPERATOR_CONCURRENCY = 2
"""Database operations the dashboard runs at once; the rest wait their turn on the event loop.

The dashboard shares the inbox's connection pool when `serve` mounts it: capped, operator
work can hold at most this many of the pool's connections (and threads), whatever the number
of operators or requests, so ingest and the probes always find one (issue 19)."""


WORKER_GROUPS = 50
"""Hosts-and-kinds listed on the overview; `hookinbox status` counts every one."""


def _bad_request(message: str) -> HTTPException:
    return HTTPException(400, message)


FREE_TEXT = frozenset({"reason"})
"""Fields kept as typed (escaped where stored and shown), whatever they hold."""


def refuse_nul(fields: QueryParams | FormData) -> None:
    """A 400 for a NUL in any field but free text: no stored id, type, source or value holds
    one (PostgreSQL text cannot), and on PostgreSQL the query itself would fail (a 500)."""
    for name, value in fields.multi_items():
        if isinstance(value, str) and "\x00" in value and name not in FREE_TEXT:
            raise _bad_request(
                f"{printable(name)[:40]}: a NUL character (\\x00) is never part of a filter, "
                "a search or an event id"
            )


def parse_filters(params: QueryParams | FormData, now: datetime) -> EventFilter:
    """The event list's form fields as a filter; a malformed value is a 400 that says why."""

    def text(name: str) -> str | None:
        value = params.get(name)
        return value.strip() or None if isinstance(value, str) else None

    status = text("status")
    try:
        chosen = Status(status) if status else None
        since, until = (text("since"), text("until"))
        return EventFilter(
            status=chosen,
            source=text("source"),
            event_type=text("type"),
            since=parse_time(since, now) if since else None,
            until=parse_time(until, now) if until else None,
            event_id=text("q"),
        )
    except ValueError:
        raise _bad_request(f"unknown status {status!r}") from None
    except ConfigurationError as error:
        raise _bad_request(str(error)) from None


def parse_search(params: QueryParams) -> PayloadMatch | None:
    """The payload search fields (`path`, `equals`), checked; a 400 that says why otherwise."""
    path, value = params.get("path", "").strip(), params.get("equals", "")
    if not path:
        return None
    try:
        return search_for(path, value.strip())
    except ValueError as error:
        raise _bad_request(str(error)) from None


MAX_FORM_BYTES = 16 * 1024
"""The dashboard's forms hold a token and a few filter fields."""


async def read_form(request: Request) -> FormData:
    """A URL-encoded form (all the dashboard's forms are), parsed without python-multipart."""
    if request.headers.get("content-type", "").split(";")[0] != URLENCODED:
        raise HTTPException(415, f"forms must be sent as {URLENCODED}")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise HTTPException(413, "form too large")
    try:
        fields: list[tuple[str, str | UploadFile]] = list(
            parse_qsl(body.decode(), keep_blank_values=True, max_num_fields=50)
        )
    except (UnicodeDecodeError, ValueError):
        raise _bad_request("malformed form") from None
    return FormData(fields)


def encode_cursor(row: dict[str, Any]) -> str:
    return f"{row['received_at'].isoformat()}~{row['id']}"


def parse_cursor(text: str) -> Cursor:
    """The `before` field: the last row's `received_at~id`, its time with its zone (as
    `encode_cursor` writes it); a time without one is a 400, never compared as if UTC."""
    received_at, _, row_id = text.rpartition("~")
    try:
        at, number = datetime.fromisoformat(received_at), int(row_id)
    except ValueError:
        raise _bad_request(f"not a page cursor: {text!r}") from None
    if at.tzinfo is None:
        raise _bad_request(f"not a page cursor: {text!r} (its time has no time zone)")
    return at, number


def filter_fields(filters: EventFilter) -> dict[str, str]:
    """A filter as the form fields that produce it (for links and hidden inputs)."""
    fields = {
        "status": filters.status.value if filters.status else None,
        "source": filters.source,
        "type": filters.event_type,
        "since": filters.since.isoformat() if filters.since else None,
        "until": filters.until.isoformat() if filters.until else None,
        "q": filters.event_id,
    }
    return {name: value for name, value in fields.items() if value}


def _ratio(buckets: Sequence[Bucket]) -> float:
    """The duplicate ratio of several sources' buckets together."""
    deliveries = sum(b.deliveries for b in buckets)
    return sum(b.duplicates for b in buckets) / deliveries if deliveries else 0.0


def pretty_body(payload: Callable[[], Any], body: bytes) -> str:
    try:
        return json.dumps(payload(), indent=2, ensure_ascii=False, default=str, sort_keys=True)
    except ValueError:  # neither JSON nor a form: shown as text
        return body.decode("utf-8", "replace")


class Dashboard:
    def __init__(
        self, store: Store, token: str, sources: Sequence[str], thresholds: Thresholds
    ) -> None:
        self.store = store
        self.sessions = Sessions(token)
        self.sign_ins = SignInLimiter()
        self.sources = list(sources)
        self.thresholds = thresholds
        self.limiter = CapacityLimiter(OPERATOR_CONCURRENCY)

    async def off_loop(self, function: Callable[..., T], *args: Any) -> T:
        """Storage is synchronous SQLAlchemy: it runs in a worker thread, off the event loop,
        within the dashboard's own cap (`OPERATOR_CONCURRENCY`)."""
        return await anyio.to_thread.run_sync(function, *args, limiter=self.limiter)

    # -- plumbing --------------------------------------------------------------------------

    def render(
        self,
        request: Request,
        name: str,
        session: Session | None,
        status_code: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        html = _templates.get_template(name).render(
            base=mount_path(request),
            csrf=session.csrf if session else "",
            signed_in=bool(session and session.authenticated),
            statuses=[s.value for s in Status],
            known_sources=self.sources,
            **context,
        )
        return HTMLResponse(html, status_code)

    def redirect(self, request: Request, path: str) -> RedirectResponse:
        return RedirectResponse(mount_path(request) + path, 303)

    async def session(self, request: Request) -> Session | None:
        """The request's session; a signed-in one only if it was not signed out since (a
        look-up in the database: the cookie alone cannot know)."""
        session = self.sessions.read(request)
        if session is None or not session.authenticated:
            return session
        if await self.off_loop(self.store.operator.session_revoked, session.sid):
            return None
        return session

    def page(self, handler: Callable[[Request, Session], Awaitable[Response]]) -> Handler:
        """A page for signed-in operators; anyone else is sent to the login form."""

        async def guarded(request: Request) -> Response:
            session = await self.session(request)
            if session is None or not session.authenticated:
                return self.redirect(request, "/login")
            refuse_nul(request.query_params)
            return await handler(request, session)

        return guarded

    async def checked_form(self, request: Request, *, signed_in: bool = True) -> FormData:
        """A POST's form, refused (403) unless same-site, signed in and with the CSRF token."""
        if cross_site(request):
            raise HTTPException(403, "cross-site request refused")
        session = await self.session(request)
        if session is None or (signed_in and not session.authenticated):
            raise HTTPException(403, "not signed in (or the session expired): sign in again")
        form = await read_form(request)
        if not csrf_matches(session, form.get("csrf")):
            raise HTTPException(403, "missing or wrong CSRF token: reload the page and retry")
        refuse_nul(form)
        return form

    # -- sign in and out -------------------------------------------------------------------

    async def login_form(self, request: Request) -> Response:
        session = await self.session(request)
        if session is not None and session.authenticated:
            return self.redirect(request, "/")
        if session is None:  # a session before sign-in, for the login form's CSRF token
            session = self.sessions.start(authenticated=False)
            response = self.render(request, "login.html", session, error=None)
            self.sessions.save(request, response, session)
            return response
        return self.render(request, "login.html", session, error=None)

    async def login(self, request: Request) -> Response:
        wait = self.sign_ins.attempt(client_address(request))
        if wait:
            retry_after = str(math.ceil(wait))
            raise HTTPException(
                429, "too many sign-in attempts: retry later", {"Retry-After": retry_after}
            )
        form = await self.checked_form(request, signed_in=False)
        given = form.get("token")
        if not isinstance(given, str) or not self.sessions.token_matches(given):
            session = self.sessions.read(request)
            return self.render(request, "login.html", session, 401, error="Wrong token.")
        response = self.redirect(request, "/")
        # A new session on sign-in: a CSRF token seen before it is worth nothing after.
        self.sessions.save(request, response, self.sessions.start(authenticated=True))
        return response

    async def logout(self, request: Request) -> Response:
        await self.checked_form(request)
        session = self.sessions.read(request)
        assert session is not None  # checked_form refused anything else
        now = _now()
        # Server-side: a copy of this cookie (a shared machine, a proxy's log) is worth nothing
        # from now on, in every process; deleting the cookie only tidies this browser.
        until, sid = now + timedelta(seconds=SESSION_SECONDS), session.sid
        await self.off_loop(
            lambda: self.store.operator.revoke_session(sid, expires_at=until, now=now)
        )
        response = self.redirect(request, "/login")
        response.delete_cookie(COOKIE, path=mount_path(request) + "/")
        return response

    # -- pages -----------------------------------------------------------------------------

    async def overview(self, request: Request, session: Session) -> Response:
        now = _now()

        window = WINDOWS["24h"]
        start = window.start(now)

        def read() -> tuple[Any, Any, Any]:
            with self.store.reading() as connection:
                stats = self.store.stats
                figures = stats.report(connection, now)
                buckets = stats.activity(connection, start, window.width, window.buckets)
                groups = self.store.liveness.groups(connection, WORKER_GROUPS + 1)
                return figures, buckets, groups

        figures, buckets, processes = await self.off_loop(read)
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
        return self.render(
            request,
            "overview.html",
            session,
            now=now,
            figures=figures,
            sources=sorted({source for source, _ in counts} | set(self.sources)),
            counts=counts,
            breached=breached_figures(figures.open, now, self.thresholds),
            chart=time_chart(title, start, window, ratios, line=True, unit=percent, floor=0.01),
            processes=processes[:WORKER_GROUPS],
            more_processes=len(processes) > WORKER_GROUPS,
        )

    async def charts(self, request: Request, session: Session) -> Response:
        """Volume, failures and the duplicate ratio per source, over 24 hours or 7 days."""
        now = _now()
        key = request.query_params.get("window", "24h")
        if key not in WINDOWS:
            raise _bad_request(f"window is one of {', '.join(WINDOWS)}")
        window = WINDOWS[key]
        start = window.start(now)

        def read() -> dict[str, list[Bucket]]:
            with self.store.reading() as connection:
                return self.store.stats.activity(connection, start, window.width, window.buckets)

        buckets = await self.off_loop(read)
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
        return self.render(
            request, "charts.html", session,
            window=window, windows=WINDOWS, start=start, by_source=by_source,
        )  # fmt: skip

    async def event_list(self, request: Request, session: Session) -> Response:
        filters = parse_filters(request.query_params, _now())
        before_text = request.query_params.get("before")
        before = parse_cursor(before_text) if before_text else None
        search = parse_search(request.query_params)
        rows = await self.off_loop(
            lambda: self.store.operator.list_events(
                filters, PAGE_SIZE + 1, before=before, payload=search
            )
        )
        older = encode_cursor(rows[PAGE_SIZE - 1]) if len(rows) > PAGE_SIZE else None
        fields = filter_fields(filters)
        searched = {"path": ".".join(search.path), "equals": search.value} if search else {}
        return self.render(
            request,
            "events.html",
            session,
            rows=rows[:PAGE_SIZE],
            filters=filters,
            fields=fields,
            searched=searched,
            scan_limit=SCAN_LIMIT,
            older=older,
            first_page=before is None,
        )

    async def event_detail(self, request: Request, session: Session) -> Response:
        source, event_id = self._event_key(request.query_params)

        def read() -> tuple[Any, Any, Any, Any]:
            event = self.store.get_event(source, event_id)
            if event is None:
                raise HTTPException(404, f"no event {source} {event_id}")
            operator = self.store.operator
            history = operator.delivery_history(source, event_id)
            messages = self.store.outbox.for_event(source, event_id)
            return event, history, messages, operator.audit_trail(source, event_id)

        event, history, messages, trail = await self.off_loop(read)
        return self.render(
            request,
            "event.html",
            session,
            event=event,
            body=pretty_body(lambda: event.payload, event.body),
            headers=json.dumps(event.headers, indent=2, sort_keys=True),
            history=history,
            messages=messages,
            trail=trail,
            done=request.query_params.get("done"),
        )

    async def replay_confirm(self, request: Request, session: Session) -> Response:
        source, event_id = self._event_key(request.query_params)
        event = await self.off_loop(self.store.get_event, source, event_id)
        if event is None:
            raise HTTPException(404, f"no event {source} {event_id}")
        return self.render(request, "replay_one.html", session, event=event)

    async def replay(self, request: Request) -> Response:
        form = await self.checked_form(request)
        source, event_id = self._event_key(form)
        force = form.get("force") == "1"
        actor = _actor(form)
        result, _previous = await self.off_loop(
            lambda: self.store.operator.replay_one(
                source, event_id, _now(), force=force, actor=actor
            )
        )
        if result is ReplayResult.NOT_FOUND:
            raise HTTPException(404, f"no event {source} {event_id}")
        if result is ReplayResult.IN_PROGRESS:
            raise HTTPException(
                409, f"{source} {event_id} is held by a worker right now; replay it once it is done"
            )
        if result is ReplayResult.NEEDS_FORCE:
            raise HTTPException(409, f"{source} {event_id} was processed meanwhile; confirm again")
        response = self.redirect(request, "/event")
        query = QueryParams({"source": source, "id": event_id, "done": "replayed"})
        response.headers["location"] += f"?{query}"
        return response

    async def bulk_confirm(self, request: Request, session: Session) -> Response:
        filters = self._failed_only(parse_filters(request.query_params, _now()))
        count = await self.off_loop(self.store.operator.count_events, filters)
        return self.render(
            request, "replay_bulk.html", session, filters=filters,
            fields=filter_fields(filters), count=count, replayed=None,
        )  # fmt: skip

    async def bulk_replay(self, request: Request) -> Response:
        form = await self.checked_form(request)
        filters = self._failed_only(parse_filters(form, _now()))
        actor = _actor(form)
        replayed = await self.off_loop(
            lambda: sum(self.store.operator.replay_matching(filters, _now(), actor=actor))
        )
        session = self.sessions.read(request)
        return self.render(
            request, "replay_bulk.html", session, filters=filters,
            fields=filter_fields(filters), count=0, replayed=replayed,
        )  # fmt: skip

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _event_key(params: QueryParams | FormData) -> tuple[str, str]:
        source, event_id = params.get("source"), params.get("id")
        if not isinstance(source, str) or not isinstance(event_id, str) or not event_id:
            raise _bad_request("give source and id")
        return source, event_id

    @staticmethod
    def _failed_only(filters: EventFilter) -> EventFilter:
        """Bulk replay is for failed events; a status in the request is overridden."""
        return EventFilter(
            Status.FAILED, filters.source, filters.event_type, filters.since, filters.until,
            filters.event_id,
        )  # fmt: skip

    async def stylesheet(self, _request: Request) -> Response:
        return Response(_STYLESHEET, media_type="text/css")

    async def error(self, request: Request, exc: Exception) -> Response:
        if isinstance(exc, StoreUnavailable):
            status, message = 503, f"database unavailable: {exc}"
        else:
            assert isinstance(exc, HTTPException)
            status, message = exc.status_code, str(exc.detail)
        session = self.sessions.read(request)
        response = self.render(request, "error.html", session, status, code=status, message=message)
        if isinstance(exc, HTTPException) and exc.headers:
            response.headers.update(exc.headers)  # Retry-After of a 429
        return response


REASON_LIMIT = 500
"""Characters of a replay's reason kept in the audit trail (a note, not a document)."""


def _actor(form: FormData) -> Actor:
    """The dashboard's one admin token names nobody: every action is by "dashboard"."""
    reason = form.get("reason")
    text = reason.strip()[:REASON_LIMIT] if isinstance(reason, str) else ""
    return Actor("dashboard", text or None)


_STYLESHEET = resources.files("hookinbox.dashboard").joinpath("static/dashboard.css").read_bytes()


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


def dashboard_app(
    store: Store,
    token: str,
    *,
    sources: Sequence[str] = (),
    thresholds: Thresholds | None = None,
) -> ASGIApp:
    """The dashboard over `store`, signed in with `token`; mount it (at `/admin`)."""
    dashboard = Dashboard(store, token, sources, thresholds or Thresholds())
    routes = [
        Route("/", dashboard.page(dashboard.overview), methods=["GET"]),
        Route("/login", dashboard.login_form, methods=["GET"]),
        Route("/login", dashboard.login, methods=["POST"]),
        Route("/logout", dashboard.logout, methods=["POST"]),
        Route("/events", dashboard.page(dashboard.event_list), methods=["GET"]),
        Route("/charts", dashboard.page(dashboard.charts), methods=["GET"]),
        Route("/event", dashboard.page(dashboard.event_detail), methods=["GET"]),
        Route("/event/replay", dashboard.page(dashboard.replay_confirm), methods=["GET"]),
        Route("/event/replay", dashboard.replay, methods=["POST"]),
        Route("/replay", dashboard.page(dashboard.bulk_confirm), methods=["GET"]),
        Route("/replay", dashboard.bulk_replay, methods=["POST"]),
        Route("/dashboard.css", dashboard.stylesheet, methods=["GET"]),
    ]
    handlers = {HTTPException: dashboard.error, StoreUnavailable: dashboard.error}
    return SecurityHeaders(Starlette(routes=routes, exception_handlers=handlers))
