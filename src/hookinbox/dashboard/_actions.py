"""What an operator changes from the dashboard: replaying one event, or every event a filter
matches (failed ones unless it names another status; in paced batches, as the CLI's), and
erasing one event's body and headers (`hookinbox expunge SOURCE EVENT_ID`, audited the same),
or those of every event a selection matches (`expunge --source S`, after its dry-run page).

Each is a POST through `SignIn.checked_form` (same site, signed in, the CSRF token), and runs
the same operation as `hookinbox replay`, with the same rules: an event a worker holds is
refused (409), one processed since the confirmation page was shown asks to be confirmed again
(409), and each replay is recorded in the audit trail with the operator's reason.
"""

from __future__ import annotations

from starlette.datastructures import FormData, QueryParams
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from hookinbox._records import Actor, ReplayResult
from hookinbox.dashboard._context import Dashboard, utc_now
from hookinbox.dashboard._forms import (
    bad_request,
    event_key,
    filter_fields,
    parse_filters,
    parse_selection,
    replayable,
    selection_fields,
)
from hookinbox.dashboard._sign_in import SignIn

REASON_LIMIT = 500
"""Characters of a replay's reason kept in the audit trail (a note, not a document)."""


def actor_of(form: FormData) -> Actor:
    """The dashboard's one admin token names nobody: every action is by "dashboard"."""
    reason = form.get("reason")
    text = reason.strip()[:REASON_LIMIT] if isinstance(reason, str) else ""
    return Actor("dashboard", text or None)


class Actions:
    def __init__(self, dashboard: Dashboard, sign_in: SignIn) -> None:
        self.dashboard = dashboard
        self.operations = dashboard.operations
        self.sessions = dashboard.sessions
        self.sign_in = sign_in

    async def replay(self, request: Request) -> Response:
        form = await self.sign_in.checked_form(request)
        source, event_id = event_key(form)
        force = form.get("force") == "1"
        actor = actor_of(form)
        result, _previous = await self.dashboard.off_loop(
            lambda: self.operations.replay_one(
                source, event_id, utc_now(), force=force, actor=actor
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
        response = self.dashboard.redirect(request, "/event")
        query = QueryParams({"source": source, "id": event_id, "done": "replayed"})
        response.headers["location"] += f"?{query}"
        return response

    async def expunge(self, request: Request) -> Response:
        """Erase one event's payload, as `hookinbox expunge` does (never waits for a worker:
        an attempt under way goes on with the body it read)."""
        form = await self.sign_in.checked_form(request)
        source, event_id = event_key(form)
        actor = actor_of(form)
        erased = await self.dashboard.off_loop(
            lambda: self.operations.expunge_one(source, event_id, utc_now(), actor=actor)
        )
        if erased is None:
            raise HTTPException(404, f"no event {source} {event_id}")
        response = self.dashboard.redirect(request, "/event")
        query = QueryParams({"source": source, "id": event_id, "done": "erased"})
        response.headers["location"] += f"?{query}"
        return response

    async def bulk_replay(self, request: Request) -> Response:
        form = await self.sign_in.checked_form(request)
        filters = replayable(parse_filters(form, utc_now()))
        actor = actor_of(form)
        replayed = await self.dashboard.off_loop(
            lambda: sum(self.operations.replay_matching(filters, utc_now(), actor=actor))
        )
        session = self.sessions.read(request)
        return self.dashboard.render(
            request, "replay_bulk.html", session, filters=filters, status=filters.status,
            fields=filter_fields(filters), count=0, sample=[], replayed=replayed,
        )  # fmt: skip

    async def bulk_expunge(self, request: Request) -> Response:
        """Erase the payloads of every event the dry run's selection matches, as `hookinbox
        expunge --source S --older-than/--payload --yes` does (paced batches of at most 500),
        each erased event audited by "dashboard" with the reason, which is required here."""
        form = await self.sign_in.checked_form(request)
        selection = parse_selection(form, utc_now())
        if selection is None:
            raise bad_request("give a source, and a received-before time and/or a payload value")
        actor = actor_of(form)
        if actor.reason is None:
            raise bad_request("give a reason: it is kept in each erased event's audit trail")
        erased = await self.dashboard.off_loop(
            lambda: sum(self.operations.expunge_matching(selection, utc_now(), actor=actor))
        )
        session = self.sessions.read(request)
        return self.dashboard.render(
            request, "expunge_bulk.html", session, typed={}, fields=selection_fields(selection),
            count=0, known=True, erased=erased,
        )  # fmt: skip
