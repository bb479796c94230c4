"""A fake of Stripe's `GET /v1/events`, served on loopback, as Stripe documents it: newest
first, `limit` (1 to 100, default 10), `starting_after` (an id on a page before; unknown ->
404 `resource_missing`), `created[gt|gte|lt|lte]`, `type`; any other parameter -> 400; a
missing or wrong key -> 401, each error as `{"error": {"type", "message", ...}}`. Faults can
be queued ahead of the answers (`faults`). hookinbox's tests hold it to the official `stripe`
SDK pointed at it (tests/sources/test_stripe_api.py).

Hostile modes, for the limits reconcile keeps (issue 45): `stuck` answers the first page
again whatever `starting_after` says, with `has_more` true; `endless` answers a page of new
events every time, with `has_more` true; `unfiltered` lists every event whatever `created`
asks; `answer` replaces every answer (a body that drips, or never ends)."""

from __future__ import annotations

import json
import operator
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hookinbox.testing._events import stripe_event, stripe_invoice
from hookinbox.testing._loopback import Request, Response, ServedFake

LIST_PARAMETERS = {"limit", "starting_after", "ending_before", "type", "types"}
_CREATED = {"created[gt]": operator.gt, "created[gte]": operator.ge,
            "created[lt]": operator.lt, "created[lte]": operator.le}  # fmt: skip
CREATED = set(_CREATED)


def _error(status: int, kind: str, message: str, **extra: Any) -> Response:
    body = {"error": {"type": kind, "message": message, **extra}}
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


@dataclass(eq=False)
class FakeStripeAPI(ServedFake):
    """Stripe's events API for one account: `events` (what `GET /v1/events` lists; add to it
    at any time) and `faults` to answer first, one a request (`(429, {"Retry-After": "1"})`).
    `with FakeStripeAPI() as api:` serves it; configure the source with
    `Stripe(secret=..., api_key=api.api_key, api_base=api.url)`. `queries` are the listings'
    query parameters, in order."""

    events: list[dict[str, Any]] = field(default_factory=list)
    faults: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    api_key: str = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"
    queries: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    stuck: bool = False
    endless: bool = False
    unfiltered: bool = False
    answer: Callable[[], Response] | None = None

    def __call__(self, request: Request) -> Response:
        url = urlsplit(request.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        with self.lock:
            self.queries.append(query)
            fault = self.faults.pop(0) if self.faults else None
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return _error(401, "invalid_request_error", "Invalid API Key provided: sk_****")
        if fault is not None:
            status, headers = fault
            kind = "rate_limit_error" if status == 429 else "api_error"
            answer = _error(status, kind, "Request rate limit exceeded." if status == 429 else "x")
            return status, {**answer[1], **headers}, answer[2]
        if request.method != "GET" or url.path != "/v1/events":
            return _error(404, "invalid_request_error", f"Unrecognized request URL ({url.path})")
        if self.answer is not None:
            return self.answer()
        if self.endless:
            fresh = [stripe_event("invoice.paid", stripe_invoice()) for _ in range(100)]
            return _page(fresh, has_more=True)
        if self.stuck:
            query = {k: v for k, v in query.items() if k != "starting_after"}
        return self._list(query)

    def _list(self, query: dict[str, str]) -> Response:
        unknown = set(query) - LIST_PARAMETERS - CREATED
        if unknown:
            name = sorted(unknown)[0]
            return _error(400, "invalid_request_error", f"Received unknown parameter: {name}",
                          param=name)  # fmt: skip
        try:
            limit = int(query.get("limit", "10"))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 100:
            message = "Invalid integer: limit must be between 1 and 100"
            return _error(400, "invalid_request_error", message, param="limit")
        with self.lock:
            listed = sorted(self.events, key=lambda e: (e.get("created", 0), e.get("id", "")),
                            reverse=True)  # fmt: skip
        for name, keep in ({} if self.unfiltered else _CREATED).items():
            if name in query:
                bound = int(query[name])
                listed = [e for e in listed if keep(e.get("created", 0), bound)]
        if "type" in query:
            listed = [e for e in listed if e["type"] == query["type"]]
        after = query.get("starting_after")
        if after is not None:
            ids = [e.get("id") for e in listed]
            if after not in ids:
                return _error(404, "invalid_request_error", f"No such event: '{after}'",
                              code="resource_missing", param="starting_after")  # fmt: skip
            listed = listed[ids.index(after) + 1 :]
        return _page(listed[:limit], has_more=self.stuck or len(listed) > limit)


def _page(events: list[dict[str, Any]], *, has_more: bool) -> Response:
    body = {"object": "list", "data": events, "has_more": has_more, "url": "/v1/events"}
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()
