"""What every signer of `hookinbox.testing.sign` does, whichever provider's.

Each provider's signer is declared in its module of hookinbox.sources and judged in that
provider's own tests (tests/sources/test_source_*.py): by the provider's official SDK where one
verifies (PyPI's, or npm's through Node), by the documented recipe recomputed there otherwise.
Here, every declared provider at once (`providers()`): the same body signed twice is one event
and another body another, hookinbox's own source accepts what the kit signs, and a wrong
secret is refused; and the rules of `sign` itself.
"""

from __future__ import annotations

import json
import time

import pytest

from hookinbox import BadSignature
from hookinbox._headers import normalize_headers
from hookinbox.sources import BatchSource, Source, Stripe
from hookinbox.sources._provider import Provider
from hookinbox.testing import paypal_test_certificate, sendgrid_test_key, sign
from hookinbox.testing._signing import providers
from tests.http.header_sources import example_keys

EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}
KEYS = example_keys(paypal_test_certificate().pem, sendgrid_test_key().public_key)
PROVIDERS = providers()


def _key(source: Source, headers: dict[str, str], body: bytes, now: float) -> str:
    """The key `source` stores the delivery under, authenticated at `now`."""
    normalized = normalize_headers(headers)
    if isinstance(source, BatchSource):
        [identity] = source.authenticate_batch(normalized, body, now=now)
    else:
        identity = source.authenticate(normalized, body, now=now)
    return identity.event_id


@pytest.mark.parametrize("declared", PROVIDERS, ids=lambda p: p.source.__name__)
def test_every_signer_signs_a_redelivery_as_one_event_and_another_body_as_another(
    declared: Provider,
) -> None:
    source = declared.example(KEYS)
    now = time.time()
    first = sign(source, declared.event("tagone"), at=now)
    retry = sign(source, declared.event("tagone"), at=now + 60)  # a retry, a minute later
    other = sign(source, declared.event("tagtwo"), at=now)
    keys = [
        _key(source, *delivery, at)
        for delivery, at in ((first, now), (retry, now + 60), (other, now))
    ]
    if declared.new_each_delivery:  # a wake-up without an id: every delivery is an event
        assert len(set(keys)) == 3, keys
        return
    assert keys[0] == keys[1], "the same body signed twice is one event"
    assert keys[2] != keys[0], "another body is another event"


@pytest.mark.parametrize(
    "declared", [p for p in PROVIDERS if p.signed], ids=lambda p: p.source.__name__
)
def test_every_signer_signs_as_a_stranger_when_asked(declared: Provider) -> None:
    source = declared.example(KEYS)
    headers, body = sign(source, declared.event("tagone"), **declared.forgery())
    # Where the provider signs inside the body, the forgery is in the body the signer returns.
    with pytest.raises(BadSignature):
        source.verify(normalize_headers(headers), body, now=time.time())


def test_a_field_the_provider_has_not_is_refused() -> None:
    with pytest.raises(TypeError, match="topic"):
        sign(Stripe(secret="whsec_test"), EVENT, topic="orders/create")


def test_the_body_is_sent_as_given() -> None:
    raw = json.dumps(EVENT, indent=2).encode()
    assert sign(Stripe(secret="whsec_test"), raw)[1] == raw
