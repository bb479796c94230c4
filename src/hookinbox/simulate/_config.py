"""`SimulationConfig`: every knob of a run, validated once, in one frozen value."""

from __future__ import annotations

from dataclasses import dataclass, fields
from urllib.parse import urlsplit

from hookinbox._errors import ConfigurationError
from hookinbox._ranges import DAY, HOUR, Range, seconds, whole
from hookinbox.simulate._providers import PROFILES, PROVIDERS, ProviderName
from hookinbox.simulate._signing import standard_key
from hookinbox.sources._provider import Simulation

DUPLICATE_RATE = 0.00312
"""Seed 000: 312 of 100,000 Stripe events arrived two or three times in 14 months."""

RATE_FIELDS = (
    "duplicate_rate",
    "burst_rate",
    "lost_response_rate",
    "out_of_order_rate",
    "forged_rate",
    "expired_rate",
    "malformed_rate",
)

SHARE = Range(0, 1)

RANGES: dict[str, Range] = {
    "events": whole(1, 10_000_000),
    "concurrency": whole(1, 4096),
    # A start every 100 s at the slowest: 10 million of them end within 1e9 s, which a
    # sleep takes (a rate near 0 spaced starts past `time.sleep`'s limit, about 9.2e9 s).
    "rate": Range(0.01, 1_000_000),
    "seed": whole(0, 2**64 - 1),
    "duration": seconds(0, 7 * DAY, low_open=True),
    "burst_size": whole(2, 256),
    "retry_compression": Range(1, 1_000_000_000),
    "timeout": seconds(0, HOUR, low_open=True),
    **dict.fromkeys(RATE_FIELDS, SHARE),
}
"""Every number of a run, with its range: `SimulationConfig` checks them and `hookinbox
simulate`'s options take them (`cli/_simulate.py`)."""

DRAIN_TIMEOUT = seconds(0, DAY)
"""`simulate --drain-timeout`: how long `--verify` waits for processing to drain."""


@dataclass(frozen=True, slots=True)
class SimulationConfig:
    """One simulated run against one endpoint.

    Rates are shares of `events` (the valid events), turned into exact counts by rounding, so
    a report can be read against the plan: 1,000 events at the default duplicate rate is 3
    duplicated events, every time. The chaos defaults other than `duplicate_rate` are not
    measured figures: they are small enough to look like production and large enough that a
    run of a thousand events takes every path once.
    """

    provider: ProviderName
    secret: str
    target: str
    events: int = 1000
    concurrency: int = 32
    rate: float | None = None
    """Deliveries started per second for first deliveries; None sends as fast as allowed."""
    seed: int | None = None
    """None draws one; the report names it, so any run can be replayed exactly."""
    duration: float | None = None
    """Seconds after which nothing more is sent (retries still due are abandoned)."""
    duplicate_rate: float = DUPLICATE_RATE
    """Events delivered again (once or twice more) after their first delivery."""
    burst_rate: float = 0.002
    """Events whose first delivery is `burst_size` identical deliveries fired at once."""
    burst_size: int = 3
    retry_compression: float = 1000.0
    """Divides the provider's retry delays: Stripe's 5 s becomes 5 ms, its 3 days 4.3 min."""
    lost_response_rate: float = 0.002
    """Events whose first delivery is dropped by the sender once the receiver has answered."""
    out_of_order_rate: float = 0.01
    """Stripe: share of subscription chains whose first update is sent before its checkout."""
    forged_rate: float = 0.002
    """Extra deliveries signed with a wrong secret (must be answered 401)."""
    expired_rate: float = 0.002
    """Extra deliveries whose signed timestamp is 10-60 min old (401); Stripe and Standard
    Webhooks only, the others sign no timestamp."""
    malformed_rate: float = 0.002
    """Extra deliveries correctly signed over a body that is not JSON (400)."""
    timeout: float | None = None
    """Seconds to wait for an answer; None takes the provider's own (Stripe 10, Shopify 5)."""

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ConfigurationError(
                f"unknown provider {self.provider!r}: use one of {', '.join(PROVIDERS)}"
            )
        if not self.secret:
            raise ConfigurationError("a secret is needed to sign the deliveries")
        if self.provider == "standard":
            standard_key(self.secret)  # raises unless whsec_<base64>
        parts = urlsplit(self.target)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(f"the target must be an http(s) URL, not {self.target!r}")
        try:
            parts.port  # noqa: B018 - raises on a malformed port
        except ValueError as exc:
            raise ConfigurationError(f"the target's port is not valid: {self.target!r}") from exc
        optional = {"rate", "seed", "duration", "timeout"}
        for name, limits in RANGES.items():
            if name in optional:
                limits.check_optional(name, getattr(self, name))
            else:
                limits.check(name, getattr(self, name))

    @property
    def profile(self) -> Simulation:
        return PROFILES[self.provider]

    @property
    def ack_timeout(self) -> float:
        return self.profile.ack_timeout if self.timeout is None else self.timeout

    def as_dict(self) -> dict[str, object]:
        """The settings, for the report; the secret is never written out."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "secret"}
