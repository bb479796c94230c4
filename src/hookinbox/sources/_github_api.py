"""GitHub's hook deliveries, listed from its REST API for `hookinbox reconcile`, and the
redeliveries it is asked for.

GitHub does not retry a failed delivery. Its API lists a hook's deliveries of the last 3 days,
newest first (`GET /repos/{owner}/{repo}/hooks/{hook_id}/deliveries`, or
`/orgs/{org}/hooks/{hook_id}/deliveries`; `per_page` up to 100, the next page's `cursor` in
the `Link` header), and redelivers one on request (`POST .../deliveries/{id}/attempts`, 202).
Nothing listed is stored: a listed delivery has no body, and no signature. A redelivery keeps
its GUID, arrives signed, and is verified and stored as usual (`resends`).

Each GUID is counted once, at its newest attempt (a redelivery is listed beside the first
try, with the same GUID): it is redelivered when that attempt failed (no 2xx) and the inbox
does not hold it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from hookinbox.sources._provider_api import Listed, ProviderAPIError, Sleep, call, json_list

WINDOW = timedelta(days=3)
PAGE_SIZE = 100
TIMEOUT = 30.0
WHAT = "GitHub's API"
API_VERSION = "2022-11-28"


class HookDeliveries:
    """The `Listing` of a `GitHub(api_token=..., hook=...)` source."""

    window = WINDOW
    resends = True

    def __init__(
        self, *, api_token: str, api_base: str, hook_path: str, sleep: Sleep | None = None
    ) -> None:
        self._api_token = api_token
        self.api_base = api_base
        self.hook_path = hook_path
        """`repos/OWNER/REPO/hooks/ID` or `orgs/ORG/hooks/ID`."""
        self.hook_id = hook_path.rsplit("/", 1)[-1]
        self._sleep = sleep

    def __repr__(self) -> str:  # never the token
        return f"HookDeliveries(api_base={self.api_base!r}, hook_path={self.hook_path!r})"

    def _client(self) -> httpx.Client:
        headers = {
            "authorization": f"Bearer {self._api_token}",
            "accept": "application/vnd.github+json",
            "x-github-api-version": API_VERSION,
        }
        return httpx.Client(headers=headers, timeout=TIMEOUT)

    def _call(self, client: httpx.Client, method: str, url: str, **params: Any) -> httpx.Response:
        extra = {} if self._sleep is None else {"sleep": self._sleep}
        return call(client, method, url, params=params or None, what=WHAT, **extra)

    def pages(self, since: datetime) -> Iterator[list[Listed]]:
        seen: set[str] = set()
        url: str | None = f"{self.api_base}/{self.hook_path}/deliveries"
        params: dict[str, Any] = {"per_page": PAGE_SIZE}
        with self._client() as client:
            while url is not None:
                response = self._call(client, "GET", url, **params)
                deliveries = json_list(response, WHAT)
                page: list[Listed] = []
                older = False
                for delivery in deliveries:
                    if _delivered_at(delivery) < since:
                        older = True  # newest first: the rest of the list is older still
                        break
                    guid = delivery.get("guid")
                    if not isinstance(guid, str) or guid in seen:
                        continue
                    seen.add(guid)
                    page.append(self._listed(delivery, guid))
                yield page
                if older:
                    return
                url = response.links.get("next", {}).get("url")
                params = {}  # the next link carries per_page and the cursor

    def resend(self, listed: Listed) -> None:
        url = f"{self.api_base}/{self.hook_path}/deliveries/{listed.resend}/attempts"
        with self._client() as client:
            self._call(client, "POST", url)

    def _listed(self, delivery: dict[str, Any], guid: str) -> Listed:
        status = delivery.get("status_code")
        failed = not (isinstance(status, int) and 200 <= status < 300)
        event = delivery.get("event")
        headers = {"x-github-delivery": guid, "x-github-hook-id": self.hook_id}
        if isinstance(event, str):
            headers["x-github-event"] = event
        return Listed(b"{}", headers, str(delivery.get("id")) if failed else None)


def _delivered_at(delivery: dict[str, Any]) -> datetime:
    text = delivery.get("delivered_at")
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError as exc:
        raise ProviderAPIError(f"{WHAT} listed a delivery without a time") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
