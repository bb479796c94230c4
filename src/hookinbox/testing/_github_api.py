"""A fake of GitHub's hook deliveries API, served on loopback, as GitHub documents it: a
repository's hook (`/repos/{owner}/{repo}/hooks/{id}/deliveries`) or an organisation's
(`/orgs/{org}/hooks/{id}/deliveries`), newest first, `per_page` (1 to 100, default 30), the
next page's `cursor` in the `Link` header; `POST .../deliveries/{id}/attempts` answers 202 and
calls `on_redeliver` (which delivers it to the inbox, signed, as GitHub would). A wrong token
-> 401 `Bad credentials`, an unknown hook or delivery -> 404 `Not Found`, as
`{"message", "documentation_url", "status"}`. hookinbox's tests hold it to octokit
(`@octokit/rest`) pointed at it (tests/sources/test_github_api.py).

Hostile modes (issue 45): `next_url` names that URL as every answer's next page (the same
page again, or another host's); `planted` are deliveries listed first on every page, as they
are (an `id` that is a path, a time years ahead)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hookinbox.sources._github import hook_path
from hookinbox.testing._loopback import Request, Response, ServedFake

_PATH = re.compile(
    r"^/(?:repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)|orgs/(?P<org>[^/]+))/hooks/(?P<hook>\d+)"
    r"/deliveries(?:/(?P<delivery>\d+)/attempts)?$"
)


def _error(status: int, message: str) -> Response:
    body = {"message": message, "documentation_url": "https://docs.github.com/rest",
            "status": str(status)}  # fmt: skip
    return status, {"Content-Type": "application/json; charset=utf-8"}, json.dumps(body).encode()


def _ignore(delivery: dict[str, Any]) -> None:
    pass


@dataclass(eq=False)
class FakeGitHubAPI(ServedFake):
    """One hook's deliveries, as GitHub lists them: `hook` as the `GitHub` source takes it
    (`OWNER/REPO/HOOK_ID`, or `ORG/HOOK_ID`), `deliveries` (attempts built with
    `github_hook_delivery`; add to them at any time). A redelivery asked for calls
    `on_redeliver(delivery)`, which plays GitHub: deliver it to the inbox signed, under its
    `guid` (and list it beside the failure with `redeliver_as`). `redelivered` are the ids
    asked for. `with FakeGitHubAPI(...) as api:` serves it; configure the source with
    `GitHub(secret=..., api_token=api.token, hook=api.hook, api_base=api.url)`."""

    hook: str = "octo-org/shop/12345678"
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    token: str = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
    on_redeliver: Callable[[dict[str, Any]], None] = _ignore
    redelivered: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    next_url: str | None = None
    planted: list[dict[str, Any]] = field(default_factory=list)

    @property
    def hook_path(self) -> str:
        """The hook's path in the API: `repos/OWNER/REPO/hooks/ID` or `orgs/ORG/hooks/ID`."""
        return hook_path(self.hook)

    def __call__(self, request: Request) -> Response:
        url = urlsplit(request.path)
        if request.headers.get("authorization") not in (f"Bearer {self.token}",
                                                        f"token {self.token}"):  # fmt: skip
            return _error(401, "Bad credentials")
        found = _PATH.match(url.path)
        if found is None or url.path.split("/deliveries")[0].lstrip("/") != self.hook_path:
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
            next_url = f"{self.url}{url.path}?per_page={per_page}&cursor=v1_{page[-1]['id']}"
            headers["Link"] = f'<{next_url}>; rel="next"'
        if self.next_url is not None:
            headers["Link"] = f'<{self.next_url}>; rel="next"'
        return 200, headers, json.dumps([*self.planted, *page]).encode()

    def redeliver_as(self, delivery: dict[str, Any]) -> dict[str, Any]:
        """The delivery's redelivery, listed beside it: a new id, the same GUID, delivered."""
        with self.lock:
            redelivery = {**delivery, "id": max(d["id"] for d in self.deliveries) + 1,
                          "redelivery": True, "status_code": 200, "status": "OK"}  # fmt: skip
            self.deliveries.append(redelivery)
        return redelivery
