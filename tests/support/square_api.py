"""A loopback imitation of Square's `POST /v2/events` (SearchEvents), as Square documents it:
`limit` (1 to 100), `cursor`, `query.filter.created_at.start_at`/`end_at` (RFC 3339),
`query.filter.event_types`, `query.sort.order` (`ASC` or `DESC`, by `created_at`); a wrong
token -> 401 and bad input -> 400, each as `{"errors": [{"category", "code", "detail"}]}`.
tests/sources/test_square_api.py holds it to the official `squareup` SDK pointed at it.

Hostile modes (issue 45): `stuck` answers the first page again, with the same `cursor`,
whatever the search's `cursor`; `endless` answers new events and a new `cursor` every time;
`unfiltered` lists every event whatever `created_at` asks."""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.support.loopback import Answer, Request

TOKEN = "EAAAEOuLQPDbfOFxWUJhbNv2EJpbv4iLy9ncJq6Se5Lq47Oc7bZbbvnL4Fl9Cj8C"


def square_event(
    number: int, created: datetime, event_type: str = "payment.updated"
) -> dict[str, Any]:
    """An event as SearchEvents lists it (and a webhook carries it)."""
    return {
        "merchant_id": "6SSW7HV8K2ST5",
        "location_id": "S8GWD5R9QB376",
        "type": event_type,
        "event_id": f"{number:08d}-65c5-4f3f-9e4d-8c2c7a1b0d9e",
        "created_at": created.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "data": {"type": "payment", "id": f"KkAkhdMsgzn59SM8A89WgKwekxLZY{number}",
                 "object": {"payment": {"id": f"pay_{number}", "status": "COMPLETED"}}},
    }  # fmt: skip


def _error(status: int, category: str, code: str, detail: str) -> Answer:
    body = {"errors": [{"category": category, "code": code, "detail": detail}]}
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class SquareAPI:
    events: list[dict[str, Any]] = field(default_factory=list)
    token: str = TOKEN
    searches: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stuck: bool = False
    endless: bool = False
    unfiltered: bool = False
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(10**7))

    def __call__(self, request: Request) -> Answer:
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
                numbers = [next(self._numbers) for _ in range(limit)]
            fresh = [square_event(n, datetime.now(UTC)) for n in numbers]
            return _page(fresh, cursor=f"c{numbers[-1]}")
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


def _page(page: list[dict[str, Any]], cursor: str | None) -> Answer:
    body: dict[str, Any] = {"events": page, "metadata": [
        {"event_id": e.get("event_id"), "api_version": "2025-10-16"} for e in page]}  # fmt: skip
    if cursor is not None:
        body["cursor"] = cursor
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()
