"""The report: what was sent and answered, and the ledger a correct receiver must match.

The statistics describe the run (deliveries by kind and answer, latency, throughput). The
ledger describes the receiver's duty, derived from the answers alone: every valid event
answered 2xx at least once must end up applied exactly once, and no forged, expired or
malformed delivery may be answered 2xx. `verify` compares the ledger with a database.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from hookinbox.simulate._plan import INVALID_KINDS, KINDS, Plan
from hookinbox.simulate._sender import CONNECTION, DeliveryResult, SendOutcome

LATENCY_NAMES = ("p50", "p95", "p99", "max")


@dataclass(frozen=True, slots=True)
class Latency:
    """Seconds from sending a request to reading its answer's headers (answered ones only)."""

    p50: float
    p95: float
    p99: float
    max: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Latency | None:
        if not samples:
            return None
        ordered = sorted(samples)

        def rank(q: float) -> float:  # nearest rank: always a latency that was measured
            return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

        return cls(rank(0.50), rank(0.95), rank(0.99), ordered[-1])


def answer(result: DeliveryResult) -> str:
    """A delivery's answer as a report column: the status code, or why there was none."""
    return str(result.status) if result.status is not None else result.failure or "none"


@dataclass(frozen=True)
class SimulationReport:
    provider: str
    target: str
    seed: int
    settings: dict[str, object]
    started_at: datetime
    elapsed: float
    events: int
    """Valid events in the plan."""
    deliveries: int
    """Requests sent (each copy of a burst is one)."""
    not_sent: int
    """Deliveries still due when `duration` ended the run."""
    by_status: dict[str, int]
    by_kind: dict[str, dict[str, int]]
    latency: Latency | None
    throughput: float
    """Deliveries per second over the whole run."""
    planned: dict[str, int]
    # -- the ledger --
    acknowledged: frozenset[str]
    """Keys (as hookinbox stores them) of the valid events answered 2xx at least once."""
    unacknowledged: int
    """Valid events never answered 2xx: the provider gave up, or the run was cut."""
    expected_effects: dict[str, str | None]
    """Effect key -> the state it must end in (None: any). Stripe: each acknowledged
    checkout's payment intent, with its subscription's last status when all of its updates
    were acknowledged; other providers: each acknowledged event's id."""
    effect_of: dict[str, str]
    """Stored key -> effect key, for the acknowledged events that create an effect."""
    planned_effects: frozenset[str]
    """Every effect key of the valid events, acknowledged or not: none may appear twice."""
    invalid: dict[str, dict[str, int]]
    """forged / expired / malformed -> answer -> deliveries."""
    invalid_accepted: int
    """Invalid deliveries answered 2xx: a receiver failure."""
    invalid_events: dict[str, str | None] = field(default_factory=dict)
    """Stored key -> effect key of each invalid event: none may be found stored or applied."""
    invalid_answered_2xx: frozenset[str] = field(default_factory=frozenset)
    """Stored keys of the invalid events answered 2xx."""
    reached: int = 0
    """Deliveries of valid events that may have reached the receiver (all but refused
    connections): more stored deliveries than this means the events were there before."""

    @property
    def complete(self) -> bool:
        """Everything planned was sent and every valid event was acknowledged."""
        return self.not_sent == 0 and self.unacknowledged == 0

    def to_dict(self) -> dict[str, Any]:
        """The report for machines (counts only: the ledger's keys stay in the object)."""
        latency = self.latency
        return {
            "provider": self.provider,
            "target": self.target,
            "seed": self.seed,
            "settings": self.settings,
            "started_at": self.started_at.isoformat(),
            "elapsed_s": round(self.elapsed, 3),
            "events": self.events,
            "deliveries": self.deliveries,
            "not_sent": self.not_sent,
            "throughput_per_s": round(self.throughput, 1),
            "latency_ms": None
            if latency is None
            else {name: round(getattr(latency, name) * 1000, 2) for name in LATENCY_NAMES},
            "planned": self.planned,
            "by_status": self.by_status,
            "by_kind": self.by_kind,
            "acknowledged": len(self.acknowledged),
            "unacknowledged": self.unacknowledged,
            "effects_expected": len(self.expected_effects),
            "invalid": self.invalid,
            "invalid_accepted": self.invalid_accepted,
            "complete": self.complete,
        }


def _tally(results: Iterable[DeliveryResult]) -> dict[str, int]:
    counts = Counter(answer(r) for r in results)
    return dict(sorted(counts.items()))


def build_report(
    plan: Plan,
    outcome: SendOutcome,
    *,
    provider: str,
    target: str,
    settings: dict[str, object],
    started_at: datetime,
) -> SimulationReport:
    results = outcome.results
    events = plan.events
    accepted = {r.event for r in results if r.accepted}
    valid_accepted = {i for i in accepted if plan.is_valid(i)}

    # The final state of each chain: the last update by `created`, when every update of the
    # chain was acknowledged (an unacknowledged one may or may not have been applied).
    updates: dict[str, list[int]] = {}
    for index in range(plan.valid_count):
        state_of = events[index].state_of
        if state_of is not None:
            updates.setdefault(state_of, []).append(index)
    expected: dict[str, str | None] = {}
    effect_of: dict[str, str] = {}
    for index in sorted(valid_accepted):
        effect = events[index].effect
        if effect is None:
            continue
        effect_of[events[index].stored_key] = effect
        chain = updates.get(effect, [])
        final = None
        if chain and all(i in valid_accepted for i in chain):
            final = events[max(chain, key=lambda i: events[i].position)].state
        expected[effect] = final

    by_kind: dict[str, dict[str, int]] = {
        kind: _tally(r for r in results if r.kind == kind)
        for kind in KINDS
        if any(r.kind == kind for r in results)
    }
    invalid: dict[str, dict[str, int]] = {}
    for kind in INVALID_KINDS:
        if kind in by_kind:
            invalid[kind] = by_kind[kind]
    invalid_events = range(plan.valid_count, len(events))
    elapsed = max(outcome.elapsed, 1e-9)
    return SimulationReport(
        provider=provider,
        target=target,
        seed=plan.seed,
        settings=settings,
        started_at=started_at,
        elapsed=outcome.elapsed,
        events=plan.valid_count,
        deliveries=len(results),
        not_sent=outcome.not_sent,
        by_status=_tally(results),
        by_kind=by_kind,
        latency=Latency.of([r.latency for r in results if r.latency is not None]),
        throughput=len(results) / elapsed,
        planned=plan.counts(),
        acknowledged=frozenset(events[i].stored_key for i in valid_accepted),
        unacknowledged=plan.valid_count - len(valid_accepted),
        expected_effects=expected,
        effect_of=effect_of,
        planned_effects=frozenset(
            e.effect for e in events[: plan.valid_count] if e.effect is not None
        ),
        invalid=invalid,
        invalid_accepted=sum(1 for r in results if r.accepted and r.kind in INVALID_KINDS),
        invalid_events={events[i].stored_key: events[i].effect for i in invalid_events},
        invalid_answered_2xx=frozenset(
            events[i].stored_key for i in accepted if not plan.is_valid(i)
        ),
        reached=sum(1 for r in results if plan.is_valid(r.event) and r.failure != CONNECTION),
    )


def render_report(report: SimulationReport, console: Console) -> None:
    """Two compact tables: deliveries by kind and answer, then the run's figures."""
    answers = sorted(report.by_status, key=lambda a: (not a.isdigit(), a))
    table = Table(title=f"Deliveries to {report.target}", title_justify="left")
    table.add_column("kind")
    table.add_column("sent", justify="right")
    for name in answers:
        table.add_column(name, justify="right")
    for kind, tally in report.by_kind.items():
        table.add_row(kind, str(sum(tally.values())), *(str(tally.get(a, "")) for a in answers))
    table.add_row(
        "total",
        str(report.deliveries),
        *(str(report.by_status[a]) for a in answers),
        style="bold",
    )
    console.print(table)

    figures = Table(show_header=False, box=None, pad_edge=False)
    figures.add_column(style="dim")
    figures.add_column()
    latency = report.latency
    figures.add_row("provider, seed", f"{report.provider}, --seed {report.seed}")
    figures.add_row(
        "throughput",
        f"{report.throughput:,.0f} deliveries/s ({report.deliveries:,} in {report.elapsed:.2f} s)",
    )
    if latency is not None:
        values = (f"{name} {getattr(latency, name) * 1000:.1f}" for name in LATENCY_NAMES)
        figures.add_row("latency (ms)", " · ".join(values))
    figures.add_row(
        "events",
        f"{report.events:,} planned, {len(report.acknowledged):,} acknowledged, "
        f"{report.unacknowledged:,} never acknowledged",
    )
    if report.not_sent:
        figures.add_row("not sent", f"[yellow]{report.not_sent:,} (cut by --duration)[/yellow]")
    if report.invalid:
        style = "red" if report.invalid_accepted else "green"
        figures.add_row(
            "invalid answered 2xx",
            f"[{style}]{report.invalid_accepted}[/{style}] of "
            f"{sum(sum(t.values()) for t in report.invalid.values())}",
        )
    console.print(figures)
