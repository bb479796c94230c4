"""The simulator's providers come from the providers' own declarations (`Simulation`)."""

from __future__ import annotations

from hookinbox.simulate._events import SINGLE
from hookinbox.simulate._providers import PROFILES, PROVIDERS, SOURCES
from hookinbox.sources import GitHub, Shopify, StandardWebhooks, Stripe
from hookinbox.sources._provider import provider_of


def test_the_simulated_providers_are_those_whose_module_declares_a_simulation() -> None:
    assert set(SOURCES.values()) == {Stripe, Shopify, GitHub, StandardWebhooks}
    for name, profile in PROFILES.items():
        assert name == SOURCES[name].default_name
        declared = provider_of(SOURCES[name])
        assert declared is not None and declared.simulation is profile
        assert profile.retry_delays and profile.ack_timeout > 0
    assert set(PROVIDERS) == set(PROFILES) == set(SOURCES)


def test_every_simulated_provider_has_the_simulators_events() -> None:
    """A provider declaring a `Simulation` needs realistic events in simulate/_events.py."""
    assert set(SINGLE) == set(PROFILES)
