"""A ready-made fetch for `MollieClassic`: GET the resource from Mollie's API with httpx.

It maps an id's prefix to the API's collection (`tr_` payments, `ord_` orders), answers None
for a resource Mollie does not know (404, 410), and raises `VerificationUnavailable` for
everything else that is not a 200: a network failure, a refused API key, Mollie's 5xx.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from hookinbox._errors import ConfigurationError, VerificationUnavailable
from hookinbox.sources._http import api_base_url, json_answer

DEFAULT_BASE_URL = "https://api.mollie.com/v2"
DEFAULT_TIMEOUT = 5.0
DEFAULT_PATHS: Mapping[str, str] = {"tr": "payments", "ord": "orders"}


class MollieAPI:
    """`MollieClassic(fetch=MollieAPI(api_key="live_..."))`: one GET per classic call."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = DEFAULT_TIMEOUT,
        paths: Mapping[str, str] = DEFAULT_PATHS,
    ) -> None:
        if not isinstance(api_key, str) or not api_key.strip():
            raise ConfigurationError("MollieAPI needs an API key")
        if timeout <= 0:
            raise ConfigurationError("the Mollie API timeout must be positive")
        self._api_key = api_key
        self.base_url = api_base_url(base_url, "the Mollie API base URL")
        self.timeout = timeout
        self.paths = dict(paths)

    def __repr__(self) -> str:  # never the key
        return f"MollieAPI(base_url={self.base_url!r})"

    def __call__(self, resource_id: str) -> dict[str, Any] | None:
        prefix = resource_id.partition("_")[0]
        collection = self.paths.get(prefix)
        if collection is None:
            raise VerificationUnavailable(
                f"MollieAPI has no collection for ids starting {prefix}_: pass paths="
            )
        url = f"{self.base_url}/{collection}/{quote(resource_id, safe='')}"
        headers = {"authorization": f"Bearer {self._api_key}", "accept": "application/json"}
        try:
            with httpx.Client(timeout=self.timeout) as client:
                response = client.get(url, headers=headers)
        except httpx.HTTPError as exc:
            raise VerificationUnavailable(
                f"Mollie's API cannot be reached: {type(exc).__name__}"
            ) from exc
        if response.status_code in (404, 410):
            return None
        if response.status_code != 200:
            raise VerificationUnavailable(
                f"Mollie's API answered {response.status_code} for {resource_id}"
            )
        return json_answer(response, "Mollie's API")
