"""A fake of Square's `POST /v2/events` (SearchEvents), served on loopback, as Square documents
it: `limit` (1 to 100), `cursor`, `query.filter.created_at.start_at`/`end_at` (RFC 3339),
`query.filter.event_types`, `query.sort.order` (`ASC` or `DESC`, by `created_at`); a wrong
token -> 401 and bad input -> 400, each as `{"errors": [{"category", "code", "detail"}]}`.
hookinbox's tests hold it to the official `squareup` SDK pointed at it
(tests/sources/test_square_api.py).

Hostile modes (issue 45): `stuck` answers the first page again, with the same `cursor`,
whatever the search's `cursor`; `endless` answers new events and a new `cursor` every time;
`unfiltered` lists every event whatever `created_at` asks."""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hookinbox.testing._events import square_event
from hookinbox.testing._loopback import Request, Response, ServedFake


def _error(status: int, category: str, code: str, detail: str) -> Response:
    body = {"errors": [{"category": category, "code": code, "detail": detail}]}
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(eq=False)
class FakeSquareAPI(ServedFake):
    """Square's Events API for one application: `events` (what SearchEvents finds; built with
    `square_event`, added to at any time). `with FakeSquareAPI() as api:` serves it; configure
    the source with `Square(secret=..., notification_url=..., access_token=api.token,
    api_base=api.url)`. `searches` are the searches' bodies, in order."""

    events: list[dict[str, Any]] = field(default_factory=list)
    token: str = "EAAAEOuLQPDbfOFxWUJhbNv2EJpbv4iLy9ncJq6Se5Lq47Oc7bZbbvnL4Fl9Cj8C"
    searches: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    stuck: bool = False
    endless: bool = False
    unfiltered: bool = False
    _numbers: itertools.count[int] = field(default_factory=itertools.count, repr=False)

    def __call__(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return _error(401, "AUTHENTICATION_ERROR", "UNAUTHORIZED",
                          "This request could not be authorized.")  # fmt: skip
        if request.method != "POST" or request.path != "/v2/events":
            return _error(404, "INVALID_REQUEST_ERROR", "NOT_FOUND", "Resource not found.")
        try:
            search = json.loads(request.body or b"{}")
        except ValueError:
            return _error(400, "INVALID_REQUEST_ERROR", "INVALID_REQUEST_ERROR", "Invalid JSON.")
        with self.lock:
            self.searches.append(search)
            listed = list(self.events)
        limit = search.get("limit") or 100
        if not 1 <= limit <= 100:
            return _error(400, "INVALID_REQUEST_ERROR", "INVALID_VALUE",
                          "`limit` must be between 1 and 100.")  # fmt: skip
        if self.endless:
            with self.lock:
                number = next(self._numbers)
            fresh = [square_event("payment.updated", {"id": f"pay_{n}"}) for n in range(limit)]
            return _page(fresh, cursor=f"c{number}")
        if self.stuck:
            search = {k: v for k, v in search.items() if k != "cursor"}
        query = search.get("query") or {}
        created = {} if self.unfiltered else (query.get("filter") or {}).get("created_at") or {}
        if "start_at" in created:
            listed = [e for e in listed if _time(e["created_at"]) >= _time(created["start_at"])]
        if "end_at" in created:
            listed = [e for e in listed if _time(e["created_at"]) <= _time(created["end_at"])]
        types = (query.get("filter") or {}).get("event_types")
        if types:
            listed = [e for e in listed if e["type"] in types]
        descending = (query.get("sort") or {}).get("order", "DESC") == "DESC"
        listed.sort(key=lambda e: (e.get("created_at", ""), e.get("event_id", "")),
                    reverse=descending)  # fmt: skip
        start = int(search.get("cursor") or 0)
        more = self.stuck or start + limit < len(listed)
        return _page(listed[start : start + limit], cursor=str(start + limit) if more else None)


def _page(page: list[dict[str, Any]], cursor: str | None) -> Response:
    body: dict[str, Any] = {"events": page, "metadata": [
        {"event_id": e.get("event_id"), "api_version": "2025-10-16"} for e in page]}  # fmt: skip
    if cursor is not None:
        body["cursor"] = cursor
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()
