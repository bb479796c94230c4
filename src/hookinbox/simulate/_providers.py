"""The providers the simulator sends as: those whose module declares a `Simulation`.

What the simulator copies from each (its redelivery schedule, its patience, which signed
headers it sends) is declared in the provider's module, beside its source and signer
(`sources/_provider.py`); the figures come from ../shared/PROVIDERS.md and seed 000, and where
a provider documents a count and a span but not the intervals, the intervals are ours and
marked [U] there. This module only gathers them, named by the source's default name
(`stripe`, `shopify`, `github`, `standard`). The simulator's realistic events are its own
(`_events.py`); a test holds that every provider here has them.
"""

from __future__ import annotations

import hookinbox.sources
from hookinbox.sources import Source
from hookinbox.sources._provider import Simulation, provider_of

ProviderName = str
"""A simulated provider's name: its source's default name (one of `PROVIDERS`)."""


def _declared() -> dict[ProviderName, tuple[type[Source], Simulation]]:
    # The classes `import hookinbox.sources` loads; those behind an extra (PayPal, ...) are
    # not simulated, and asking for them would need their extra.
    loaded = vars(hookinbox.sources)
    found = {}
    for name in hookinbox.sources.__all__:
        declared = provider_of(cls) if isinstance(cls := loaded.get(name), type) else None
        if declared is not None and declared.simulation is not None:
            found[declared.source.default_name] = (declared.source, declared.simulation)
    return found


_DECLARED = _declared()
PROFILES: dict[ProviderName, Simulation] = {name: p for name, (_, p) in _DECLARED.items()}
"""Each simulated provider's retry schedule, answer timeout and signed headers."""
SOURCES: dict[ProviderName, type[Source]] = {name: s for name, (s, _) in _DECLARED.items()}
"""Each simulated provider's source class, which the simulator signs for."""
PROVIDERS: tuple[ProviderName, ...] = tuple(PROFILES)
