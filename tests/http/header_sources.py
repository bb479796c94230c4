"""Every source class in one inbox, for the header tests (tests/http/test_header_values.py).

Derived from the providers' own declarations (`hookinbox.testing`'s `providers()`: each
provider module's example source, example event and signature header), so a provider added to
`hookinbox.sources` is in these tests without a line here. Built the same way in the test
process and in the Flask and Django servers it starts, so a delivery signed in one is verified
in the other. PayPal's test certificate is made in the test process and handed to the servers
as a PEM file: `sign` needs its private key.
"""

from __future__ import annotations

from typing import Any

from hookinbox import Inbox
from hookinbox.sources import Source
from hookinbox.sources._provider import ExampleKeys, Provider, provider_of
from hookinbox.testing import ed25519_test_key
from hookinbox.testing._signing import providers


def example_keys(paypal_pem: str, sendgrid_key: str) -> ExampleKeys:
    return ExampleKeys(ed25519=ed25519_test_key().hex, p256=sendgrid_key, paypal_pem=paypal_pem)


def build_sources(paypal_pem: str, sendgrid_key: str) -> list[Source]:
    """One source of every provider class, as its module's example configures it."""
    keys = example_keys(paypal_pem, sendgrid_key)
    return [declared.example(keys) for declared in providers()]


def build_inbox(database_url: str, paypal_pem: str, sendgrid_key: str) -> Inbox:
    inbox = Inbox(database_url)
    for source in build_sources(paypal_pem, sendgrid_key):
        inbox.add_source(source)
    return inbox


def _provider(source: Source) -> Provider:
    declared = provider_of(type(source))
    assert declared is not None, type(source)
    return declared


def signature_header(source: Source) -> str | None:
    """The header `source`'s signature travels in; None where nothing is signed, or the
    signature is in the body."""
    return _provider(source).signature_header


def payload(source: Source, tag: str) -> Any:
    """A body for `source` naming a new event (`tag`: letters and digits)."""
    return _provider(source).event(tag)


def wrong_secret(source: Source) -> dict[str, Any]:
    """`sign` fields that sign with a secret (or key) the source does not hold."""
    return _provider(source).forgery()


def stored_id(source: Source, answer: dict[str, Any], body_payload: Any) -> str:
    """The id an event of `payload(source, tag)` is stored under: the answer's, or for a
    batch (whose answer counts events) the one its provider names for its only event."""
    if "event_id" in answer:
        return str(answer["event_id"])
    batch_key = _provider(source).batch_key
    assert batch_key is not None, source
    return batch_key(body_payload)
