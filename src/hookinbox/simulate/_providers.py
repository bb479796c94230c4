"""What the simulator copies from each provider: its redelivery schedule and its patience.

The figures come from ../shared/PROVIDERS.md and seed 000. Where a provider documents a count
and a span but not the intervals, the intervals here are ours and marked [U], as in that page.
Retry delays are real-world seconds; the sender divides them by `retry_compression`. The
acknowledgement timeout is never compressed: it measures the receiver, which runs in real time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ProviderName = Literal["stripe", "shopify", "github", "standard"]
PROVIDERS: tuple[ProviderName, ...] = ("stripe", "shopify", "github", "standard")

MINUTE = 60.0
HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Provider:
    name: ProviderName
    retry_delays: tuple[float, ...]
    """Seconds before each automatic retry (the first retry waits `retry_delays[0]`)."""
    ack_timeout: float
    """Seconds the provider waits for an answer before it counts the attempt as failed."""
    signs_timestamp: bool
    """Whether a timestamp is signed: without one, a delivery cannot be 'expired'."""


PROFILES: dict[ProviderName, Provider] = {
    # Seed 000: 5 s, 5 min, 30 min, 2 h, 5 h, "..." for 3 days; after 5 h we continue every
    # 10 h [U], which spends 11 retries inside the 72 h. Ack timeout: seed 000 names a cold
    # start "over 10 s" as a cause of retries [U].
    "stripe": Provider(
        "stripe",
        (5, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, *(10 * HOUR,) * 6),
        10.0,
        True,
    ),
    # 8 retries over 4 h (documented since Sept 2024); the intervals are not published [U].
    # Shopify gives up on an answer after 5 s.
    "shopify": Provider(
        "shopify",
        (10, 30, MINUTE, 5 * MINUTE, 15 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR),
        5.0,
        False,
    ),
    # GitHub retries nothing by itself; failed deliveries are redelivered by hand (or by the
    # script GitHub documents) within 3 days. Modelled as one redelivery an hour later [U].
    "github": Provider("github", (HOUR,), 10.0, False),
    # Svix: 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; 15 s to answer.
    "standard": Provider(
        "standard",
        (5, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR),
        15.0,
        True,
    ),
}
