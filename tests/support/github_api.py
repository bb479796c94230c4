"""A loopback imitation of GitHub's hook deliveries API, as GitHub documents it: a
repository's hook (`/repos/{owner}/{repo}/hooks/{id}/deliveries`) or an organisation's
(`/orgs/{org}/hooks/{id}/deliveries`), newest first, `per_page` (1 to 100, default 30), the
next page's `cursor` in the `Link` header; `POST .../deliveries/{id}/attempts` answers 202 and
calls `on_redeliver` (a test delivers it to the inbox, signed, as GitHub would). A wrong token
-> 401 `Bad credentials`, an unknown hook or delivery -> 404 `Not Found`, as
`{"message", "documentation_url", "status"}`. tests/sources/test_github_api.py holds it to
octokit (`@octokit/rest`) pointed at it.

Hostile modes (issue 45): `next_url` names that URL as every answer's next page (the same
page again, or another host's); `planted` are deliveries listed first on every page, as they
are (an `id` that is a path, a time years ahead)."""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.loopback import Answer, Request

TOKEN = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
_PATH = re.compile(
    r"^/(?:repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)|orgs/(?P<org>[^/]+))/hooks/(?P<hook>\d+)"
    r"/deliveries(?:/(?P<delivery>\d+)/attempts)?$"
)


def hook_delivery(
    number: int, at: datetime, *, status_code: int = 200, event: str = "push", guid: str = ""
) -> dict[str, Any]:
    """A delivery as the list shows it (no body, no headers: those are in the detail)."""
    return {
        "id": 10_000_000 + number,
        "guid": guid or str(uuid.UUID(int=number)),
        "delivered_at": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "redelivery": False,
        "duration": 0.27,
        "status": "OK" if status_code < 300 else f"Invalid HTTP Response: {status_code}",
        "status_code": status_code,
        "event": event,
        "action": None,
        "installation_id": None,
        "repository_id": 1296269,
        "throttled_at": None,
    }


def _error(status: int, message: str) -> Answer:
    body = {"message": message, "documentation_url": "https://docs.github.com/rest",
            "status": str(status)}  # fmt: skip
    return status, {"Content-Type": "application/json; charset=utf-8"}, json.dumps(body).encode()


@dataclass
class GitHubAPI:
    """One hook's deliveries (`hook`: `repos/OWNER/REPO/hooks/ID` or `orgs/ORG/hooks/ID`)."""

    base: str = ""
    hook: str = "repos/octo-org/shop/hooks/12345678"
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    token: str = TOKEN
    on_redeliver: Callable[[dict[str, Any]], None] = lambda delivery: None
    redelivered: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_url: str | None = None
    planted: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, request: Request) -> Answer:
        url = urlsplit(request.path)
        if request.headers.get("authorization") not in (f"Bearer {self.token}",
                                                        f"token {self.token}"):  # fmt: skip
            return _error(401, "Bad credentials")
        found = _PATH.match(url.path)
        if found is None or url.path.split("/deliveries")[0].lstrip("/") != self.hook:
            return _error(404, "Not Found")
        with self.lock:
            listed = sorted(self.deliveries, key=lambda d: d["id"], reverse=True)
        if found["delivery"] is not None:
            if request.method != "POST":
                return _error(404, "Not Found")
            matching = [d for d in listed if d["id"] == int(found["delivery"])]
            if not matching:
                return _error(404, "Not Found")
            with self.lock:
                self.redelivered.append(matching[0]["id"])
            self.on_redeliver(matching[0])
            return 202, {"Content-Type": "application/json; charset=utf-8"}, b"{}"
        if request.method != "GET":
            return _error(404, "Not Found")
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        per_page = min(max(int(query.get("per_page", "30")), 1), 100)
        cursor = query.get("cursor")
        if cursor is not None:
            last = int(cursor.removeprefix("v1_"))
            listed = [d for d in listed if d["id"] < last]
        page = listed[:per_page]
        headers = {"Content-Type": "application/json; charset=utf-8"}
        if len(listed) > per_page:
            next_url = f"{self.base}{url.path}?per_page={per_page}&cursor=v1_{page[-1]['id']}"
            headers["Link"] = f'<{next_url}>; rel="next"'
        if self.next_url is not None:
            headers["Link"] = f'<{self.next_url}>; rel="next"'
        return 200, headers, json.dumps([*self.planted, *page]).encode()

    def redeliver_as(self, delivery: dict[str, Any]) -> dict[str, Any]:
        """The delivery's redelivery, listed beside it: a new id, the same GUID."""
        with self.lock:
            redelivery = {**delivery, "id": max(d["id"] for d in self.deliveries) + 1,
                          "redelivery": True, "status_code": 200, "status": "OK"}  # fmt: skip
            self.deliveries.append(redelivery)
        return redelivery
