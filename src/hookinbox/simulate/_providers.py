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

from dataclasses import dataclass

import hookinbox.sources
from hookinbox.sources import Source
from hookinbox.sources._provider import Simulation, provider_of

ProviderName = str
"""A simulated provider's name: its source's default name (one of `PROVIDERS`)."""


@dataclass(frozen=True, slots=True)
class Provider:
    name: ProviderName
    source: type[Source]
    simulation: Simulation

    @property
    def retry_delays(self) -> tuple[float, ...]:
        return self.simulation.retry_delays

    @property
    def ack_timeout(self) -> float:
        return self.simulation.ack_timeout

    @property
    def signs_timestamp(self) -> bool:
        return self.simulation.signs_timestamp


def _declared() -> dict[ProviderName, Provider]:
    # The classes `import hookinbox.sources` loads; those behind an extra (PayPal, ...) are
    # not simulated, and asking for them would need their extra.
    loaded = vars(hookinbox.sources)
    found = {}
    for name in hookinbox.sources.__all__:
        declared = provider_of(cls) if isinstance(cls := loaded.get(name), type) else None
        if declared is not None and declared.simulation is not None:
            source = declared.source
            found[source.default_name] = Provider(source.default_name, source, declared.simulation)
    return found


PROFILES: dict[ProviderName, Provider] = _declared()
PROVIDERS: tuple[ProviderName, ...] = tuple(PROFILES)
