"""The exactly-once oracle: effects found against effects expected, each once.

Shared by `hookinbox simulate --verify` (a run's ledger against a receiver's database) and
`hookinbox.testing.check_exactly_once` (a user's events against the user's own `effects`):
one definition of lost, doubled and stale, so the two checks cannot disagree on what
exactly-once means. Pure: counting is the callers' business, judging is this module's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class EffectsVerdict:
    expected: int
    found: int
    """Expected effects present at least once."""
    missing: frozenset[str]
    """Expected effects with no row: lost."""
    doubled: Mapping[str, int] = field(default_factory=dict)
    """Effects found more than once, and how many times: applied more than once."""
    states_checked: int = 0
    states_wrong: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Effects whose final state is not the expected one: (expected, found)."""

    @property
    def extra_copies(self) -> int:
        return sum(n - 1 for n in self.doubled.values())

    @property
    def ok(self) -> bool:
        return not (self.missing or self.doubled or self.states_wrong)

    def problems(self) -> list[str]:
        lines = []
        if self.missing:
            lines.append(f"{len(self.missing)} expected effects missing: {_some(self.missing)}")
        if self.doubled:
            detail = ", ".join(f"{k} x{n}" for k, n in sorted(self.doubled.items())[:5])
            lines.append(f"{len(self.doubled)} effects applied more than once: {detail}")
        if self.states_wrong:
            detail = ", ".join(
                f"{k}: {found!r}, not {want!r}"
                for k, (want, found) in sorted(self.states_wrong.items())[:5]
            )
            lines.append(f"{len(self.states_wrong)} final states wrong: {detail}")
        return lines


def judge_effects(
    expected: Mapping[str, str | None],
    counts: Counter[str],
    states: Mapping[str, object] | None = None,
    *,
    judged: Collection[str] | None = None,
) -> EffectsVerdict:
    """Each key of `expected` must be counted exactly once, and where a state is expected,
    found in that state. `judged` (default: the expected keys) are the keys whose doubles
    count: another key's rows belong to someone else."""
    states = states or {}
    scope = expected.keys() if judged is None else judged
    missing = frozenset(key for key in expected if not counts[key])
    doubled = {key: n for key, n in counts.items() if key in scope and n > 1}
    checked = 0
    wrong: dict[str, tuple[str, str]] = {}
    for key, state in expected.items():
        if state is None or key not in states:
            continue
        checked += 1
        if str(states[key]) != state:
            wrong[key] = (state, str(states[key]))
    return EffectsVerdict(
        expected=len(expected),
        found=len(expected) - len(missing),
        missing=missing,
        doubled=doubled,
        states_checked=checked,
        states_wrong=wrong,
    )


def _some(keys: Collection[str], limit: int = 5) -> str:
    shown = sorted(keys)[:limit]
    more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
    return ", ".join(shown) + more
