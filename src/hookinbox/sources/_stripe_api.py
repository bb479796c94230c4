"""Stripe's events, listed from its API (`GET /v1/events`) for `hookinbox reconcile`.

Stripe keeps events for 30 days and lists them newest first, at most 100 a page: the first
request names `created[gte]`, each next one also `starting_after` (the last id of the page
before) while `has_more` is true. No other filter is sent, so every event the account sent in
the window is seen and counted. httpx rather than the `stripe` SDK: one GET is all reconcile
needs, httpx is what hookinbox's other API calls use already (the `http` extra), and the SDK
would add a second HTTP stack, its own retries (we honour `Retry-After` ourselves) and a
global configuration to an application that may use another version of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx

from hookinbox.sources._provider_api import Listed, ProviderAPIError, Sleep, get_json

WINDOW = timedelta(days=30)
PAGE_SIZE = 100
TIMEOUT = 30.0
WHAT = "Stripe's API"


class StripeEvents:
    """The `Listing` of a `Stripe(api_key=...)` source."""

    window = WINDOW
    resends = False

    def __init__(self, *, api_key: str, api_base: str, sleep: Sleep | None = None) -> None:
        self._api_key = api_key
        self.api_base = api_base
        self._sleep = sleep

    def __repr__(self) -> str:  # never the key
        return f"StripeEvents(api_base={self.api_base!r})"

    def pages(self, since: datetime) -> Iterator[list[Listed]]:
        params: dict[str, Any] = {"created[gte]": int(since.timestamp()), "limit": PAGE_SIZE}
        headers = {"authorization": f"Bearer {self._api_key}", "accept": "application/json"}
        extra = {} if self._sleep is None else {"sleep": self._sleep}
        with httpx.Client(headers=headers, timeout=TIMEOUT) as client:
            while True:
                page = get_json(
                    client, f"{self.api_base}/v1/events", params=params, what=WHAT, **extra
                )
                data = page.get("data")
                if not isinstance(data, list) or not all(isinstance(e, dict) for e in data):
                    raise ProviderAPIError(f"{WHAT} answered a list without its data")
                yield [Listed(json.dumps(event).encode()) for event in data]
                if not page.get("has_more") or not data:
                    return
                last = data[-1].get("id")
                if not isinstance(last, str):
                    raise ProviderAPIError(f"{WHAT} listed an event without an id")
                params = {**params, "starting_after": last}

    def resend(self, listed: Listed) -> None:
        raise NotImplementedError("Stripe's listed events are stored, not resent")
