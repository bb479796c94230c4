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

The token goes nowhere but `api_base`'s origin: a next page named on another origin (scheme,
host or port) stops the run unasked. A delivery's id goes into the redelivery's path only when
it is what GitHub's ids are, a positive integer; any other is marked (`BAD_ID`), counted and
never sent.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from hookinbox.sources._provider_api import (
    BAD_ID,
    NOT_EVENT,
    READ_TIMEOUT,
    Answer,
    Budget,
    Listed,
    ProviderAPIError,
    Sleep,
    call,
    check_page_size,
    json_list,
    same_origin,
)

WINDOW = timedelta(days=3)
PAGE_SIZE = 100
WHAT = "GitHub's API"
API_VERSION = "2022-11-28"
MAX_ID = 2**63 - 1
"""GitHub's ids are 64-bit integers."""


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
        return httpx.Client(headers=headers, timeout=READ_TIMEOUT)

    def _call(self, client: httpx.Client, method: str, url: str, budget: Budget) -> Answer:
        sleep = self._sleep or time.sleep
        return call(client, method, url, what=WHAT, budget=budget, sleep=sleep)

    def pages(self, since: datetime, budget: Budget) -> Iterator[list[Listed]]:
        seen: set[str] = set()
        url = f"{self.api_base}/{self.hook_path}/deliveries?per_page={PAGE_SIZE}"
        pager = budget.pager(WHAT)
        pager.next_page(url)
        with self._client() as client:
            while True:
                answer = self._call(client, "GET", url, budget)
                page: list[Listed] = []
                older = False
                deliveries = json_list(answer, WHAT)
                check_page_size(deliveries, PAGE_SIZE, WHAT)
                for delivery in deliveries:
                    at = _delivered_at(delivery)
                    if at is not None and at < since:
                        older = True  # newest first: the rest of the list is older still
                        break
                    guid = delivery.get("guid")
                    if isinstance(guid, str) and guid in seen:
                        continue  # an older attempt of a GUID listed already
                    if isinstance(guid, str) and guid:
                        seen.add(guid)
                    page.append(self._listed(delivery, guid, at))
                yield page
                found = answer.links.get("next", {}).get("url")
                if older or not found:
                    return
                url = self._next_page(url, found)
                pager.next_page(url)

    def _next_page(self, current: str, found: str) -> str:
        """The next page's URL, if it is on `api_base`'s origin: its request carries the
        token, which no other host may see."""
        url = urljoin(current, found)
        if not same_origin(self.api_base, url):
            parts = urlsplit(url)
            raise ProviderAPIError(
                f"{WHAT} named its next page on another origin ({parts.scheme}://"
                f"{parts.netloc.rpartition('@')[2]}): not asked, since the request would "
                "carry the token"
            )
        return url

    def resend(self, listed: Listed, budget: Budget) -> None:
        delivery = listed.resend
        if delivery is None or not (delivery.isascii() and delivery.isdigit()):
            raise ProviderAPIError(f"{WHAT}: no redelivery of an id that is not a number")
        url = f"{self.api_base}/{self.hook_path}/deliveries/{delivery}/attempts"
        with self._client() as client:
            self._call(client, "POST", url, budget)

    def _listed(self, delivery: dict[str, Any], guid: object, at: datetime | None) -> Listed:
        if not isinstance(guid, str) or not guid or at is None:
            return Listed(b"{}", skip=NOT_EVENT)  # no GUID or no time: no delivery to read
        headers = {"x-github-delivery": guid, "x-github-hook-id": self.hook_id}
        event = delivery.get("event")
        if isinstance(event, str):
            headers["x-github-event"] = event
        delivery_id = delivery.get("id")
        if not _is_id(delivery_id):
            return Listed(b"{}", headers, at=at, skip=BAD_ID)
        status = delivery.get("status_code")
        failed = not (isinstance(status, int) and 200 <= status < 300)
        return Listed(b"{}", headers, str(delivery_id) if failed else None, at=at)


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_ID


def _delivered_at(delivery: dict[str, Any]) -> datetime | None:
    text = delivery.get("delivered_at")
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
