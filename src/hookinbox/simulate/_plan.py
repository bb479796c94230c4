"""The delivery plan: which event is sent when, how, and how often, drawn from one seed.

Everything random about a run is decided here, before the first send, from
`random.Random(seed)` and an injected `now`: the same seed and clock give an equal `Plan`.
Only what depends on the receiver's answers is left to the sender: retries (the provider's
schedule after a failed attempt) and their timing.

Rates become exact counts (`round(rate * events)`) chosen with `rng.sample`, so a report can be
checked against the configuration rather than against a random draw.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, replace
from typing import Literal

from hookinbox.simulate._config import SimulationConfig
from hookinbox.simulate._events import SUBSCRIPTION_UPDATED, GeneratedEvent, loose_events, stream

DeliveryKind = Literal["first", "retry", "duplicate", "burst", "forged", "expired", "malformed"]
KINDS: tuple[DeliveryKind, ...] = (
    "first",
    "burst",
    "retry",
    "duplicate",
    "forged",
    "expired",
    "malformed",
)
InvalidKind = Literal["forged", "expired", "malformed"]
INVALID_KINDS: tuple[InvalidKind, ...] = ("forged", "expired", "malformed")

OUT_OF_ORDER_GAP = (0.05, 0.8)
"""Seconds by which a reordered checkout trails its update (seed 000 saw 800 ms)."""
EXPIRED_AGE = (600, 3600)
"""Seconds a replayed signature's timestamp lies in the past: well past any 300 s tolerance."""
SECOND_DUPLICATE = 0.25
"""Share of duplicated events delivered three times rather than twice (seed 000: '2-3 times')."""


@dataclass(frozen=True, slots=True)
class PlannedDelivery:
    at: float
    """Seconds after the start of the run."""
    event: int
    """Index into `Plan.events`."""
    kind: DeliveryKind
    copies: int = 1
    """A burst: this many identical deliveries fired at the same moment."""
    lose_response: bool = False
    """Drop the connection once the receiver answers, without reading the answer."""
    age: int = 0
    """An expired delivery: seconds its signed timestamp lies in the past."""


@dataclass(frozen=True)
class Plan:
    seed: int
    events: tuple[GeneratedEvent, ...]
    """The valid events (`valid_count` of them, in stream order), then the invalid ones."""
    valid_count: int
    deliveries: tuple[PlannedDelivery, ...]
    """In the order they fall due (retries are added by the sender as answers come)."""

    def is_valid(self, event: int) -> bool:
        return event < self.valid_count

    def counts(self) -> dict[str, int]:
        """Planned deliveries by kind (a burst counts each of its copies)."""
        counter: Counter[str] = Counter()
        for delivery in self.deliveries:
            counter[delivery.kind] += delivery.copies
        counter["lost_response"] = sum(d.lose_response for d in self.deliveries)
        return {kind: counter[kind] for kind in (*KINDS, "lost_response") if counter[kind]}


def _count(rate: float, total: int) -> int:
    return round(rate * total)


def _pick(rng: random.Random, pool: list[int], rate: float, total: int) -> set[int]:
    return set(rng.sample(pool, min(len(pool), _count(rate, total))))


def build_plan(config: SimulationConfig, *, seed: int, now: float) -> Plan:
    """The whole run, decided up front (see the module docstring)."""
    rng = random.Random(seed)
    events = stream(config.provider, rng, config.events, now)
    total = len(events)
    pace = 1.0 / config.rate if config.rate else 0.0
    first_at = [index * pace for index in range(total)]
    delays = config.profile.retry_delays
    compression = config.retry_compression

    everyone = list(range(total))
    bursts = _pick(rng, everyone, config.burst_rate, total)
    lost = _pick(rng, [i for i in everyone if i not in bursts], config.lost_response_rate, total)
    duplicated = _pick(rng, everyone, config.duplicate_rate, total)

    # Out of order: the chain's checkout is held back until just after its first update.
    chains: dict[int, list[int]] = {}
    for index, event in enumerate(events):
        chains.setdefault(event.chain, []).append(index)
    reorderable = [
        members
        for members in chains.values()
        if config.provider == "stripe"
        and any(events[i].event_type == SUBSCRIPTION_UPDATED for i in members)
    ]
    swapped = rng.sample(reorderable, _count(config.out_of_order_rate, len(reorderable)))
    for members in swapped:
        checkout = members[0]
        update = next(i for i in members if events[i].event_type == SUBSCRIPTION_UPDATED)
        first_at[checkout] = first_at[update] + rng.uniform(*OUT_OF_ORDER_GAP)

    # (at, order, delivery): equal times keep stream order; invalid ones are mixed in.
    planned: list[tuple[float, float, PlannedDelivery]] = []
    for index in everyone:
        if index in bursts:
            delivery = PlannedDelivery(first_at[index], index, "burst", copies=config.burst_size)
        else:
            delivery = PlannedDelivery(first_at[index], index, "first", lose_response=index in lost)
        planned.append((delivery.at, index, delivery))
    for index in sorted(duplicated):
        # A duplicate lands when one of the provider's retries would have: it is a retry of
        # an attempt the provider did not see acknowledged.
        for number in range(2 if rng.random() < SECOND_DUPLICATE else 1):
            delay = delays[min(number, len(delays) - 1)] * (number + 1) / compression
            at = first_at[index] + delay
            planned.append((at, index, PlannedDelivery(at, index, "duplicate")))

    invalid: list[GeneratedEvent] = []
    span = first_at[-1] if pace else 0.0
    kinds: list[InvalidKind] = ["forged", "malformed"]
    if config.profile.signs_timestamp:
        kinds.insert(1, "expired")  # nothing to expire where no timestamp is signed
    for kind in kinds:
        count = _count(getattr(config, f"{kind}_rate"), total)
        for event in loose_events(config.provider, rng, count, now):
            if kind == "malformed":  # authentic bytes that are not JSON: a cut-off body
                event = replace(event, body=event.body[: len(event.body) // 2])
            index = total + len(invalid)
            invalid.append(event)
            at = rng.uniform(0, span)
            age = rng.randint(*EXPIRED_AGE) if kind == "expired" else 0
            planned.append((at, rng.uniform(0, total), PlannedDelivery(at, index, kind, age=age)))

    planned.sort(key=lambda item: (item[0], item[1]))
    return Plan(
        seed=seed,
        events=(*events, *invalid),
        valid_count=total,
        deliveries=tuple(delivery for _, _, delivery in planned),
    )
