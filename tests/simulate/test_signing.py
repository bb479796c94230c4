"""The simulator's signatures, checked by our own sources and by the providers' SDKs.

Each request is built exactly as the sender builds it (`build_request`) from a real plan, so
these tests cover what goes on the wire: valid deliveries verify and name the key hookinbox
stores; forged ones fail the signature, expired ones the replay window, malformed ones parse.
"""

from __future__ import annotations

import random
import time

import pytest
import standardwebhooks
import stripe

from hookinbox import BadSignature, PayloadError, TimestampOutOfTolerance
from hookinbox._headers import normalize_headers
from hookinbox.simulate import SimulationConfig, build_plan
from hookinbox.simulate._sender import build_request
from hookinbox.simulate._signing import Signer, forger
from hookinbox.sources import GitHub, Shopify, Source, StandardWebhooks, Stripe

NOW = 1_790_000_000.0
SECRETS = {
    "stripe": "whsec_simulated_secret",
    "shopify": "shopify-client-secret",
    "github": "It's a Secret to Everybody",
    "standard": "whsec_c2ltdWxhdGVkLXN0YW5kYXJkLXNlY3JldA==",
}
SOURCES: dict[str, type[Source]] = {
    "stripe": Stripe,
    "shopify": Shopify,
    "github": GitHub,
    "standard": StandardWebhooks,
}
RATES = {"forged_rate": 0.1, "expired_rate": 0.1, "malformed_rate": 0.1}


def deliveries(provider: str) -> list[tuple[str, dict[str, str], bytes, str]]:
    """(kind, headers, body, stored key) for every planned delivery of a small plan."""
    config = SimulationConfig(
        provider=provider,  # type: ignore[arg-type]
        secret=SECRETS[provider],
        target="http://127.0.0.1:9/hook",
        events=40,
        **RATES,
    )
    plan = build_plan(config, seed=7, now=NOW)
    signer = Signer(config.provider, config.secret)
    forgery = forger(config.provider, random.Random(7))
    built = []
    for delivery in plan.deliveries:
        headers, body = build_request(plan, delivery, signer, forgery, now=NOW)
        built.append((delivery.kind, headers, body, plan.events[delivery.event].stored_key))
    return built


@pytest.mark.parametrize("provider", list(SOURCES))
def test_our_sources_accept_valid_and_refuse_invalid_deliveries(provider: str) -> None:
    source = SOURCES[provider](secret=SECRETS[provider])
    kinds = set()
    for kind, headers, body, key in deliveries(provider):
        kinds.add(kind)
        lowered = normalize_headers(headers)
        if kind in ("first", "burst", "duplicate"):
            assert source.authenticate(lowered, body, now=NOW).event_id == key
        elif kind == "forged":
            with pytest.raises(BadSignature):
                source.authenticate(lowered, body, now=NOW)
        elif kind == "expired":
            with pytest.raises(TimestampOutOfTolerance):
                source.authenticate(lowered, body, now=NOW)
        else:
            assert kind == "malformed"
            source.verify(lowered, body, now=NOW)  # authentic bytes...
            with pytest.raises(PayloadError):  # ...that are no event
                source.identify(lowered, body)
    expected = {"first", "forged", "malformed"}
    if provider in ("stripe", "standard"):  # the others sign no timestamp to expire
        expected.add("expired")
    assert expected <= kinds


def test_stripe_sdk_accepts_the_simulated_signature() -> None:
    now = time.time()  # the SDK reads the clock itself
    for kind, headers, body, key in deliveries("stripe"):
        if kind != "first":
            continue
        resigned = Signer("stripe", SECRETS["stripe"]).sign(headers, body, int(now))
        event = stripe.Webhook.construct_event(
            body.decode(), resigned["stripe-signature"], SECRETS["stripe"]
        )
        assert event["id"] == key


def test_standard_webhooks_library_accepts_the_simulated_signature() -> None:
    webhook = standardwebhooks.Webhook(SECRETS["standard"])
    now = int(time.time())
    for kind, headers, body, key in deliveries("standard"):
        if kind != "first":
            continue
        headers |= Signer("standard", SECRETS["standard"]).sign(headers, body, now)
        assert webhook.verify(body.decode(), headers) is not None
        assert headers["webhook-id"] == key


def test_github_signature_matches_githubs_published_vector() -> None:
    signed = Signer("github", "It's a Secret to Everybody").sign({}, b"Hello, World!", 0)
    assert signed["x-hub-signature-256"] == (
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    )
