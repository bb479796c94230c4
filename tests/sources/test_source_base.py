"""Shared pieces of the sources package: header normalisation, Identity, Source basics."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from datetime import UTC, datetime, timedelta

import pytest

from hookinbox._errors import ConfigurationError
from hookinbox._headers import normalize_headers, wire_text
from hookinbox.sources import GitHub, Identity, Stripe
from hookinbox.sources._identity import parse_time


def test_normalize_headers_lower_cases_names_not_values() -> None:
    result = normalize_headers({"Stripe-Signature": "t=1,v1=ABC", "X-GitHub-Event": "Push"})
    assert result == {"stripe-signature": "t=1,v1=ABC", "x-github-event": "Push"}


def test_normalize_headers_keeps_repeats_apart_and_reads_them_joined() -> None:
    pairs = [
        ("Webhook-Signature", "v1,a"),
        ("Content-Type", "application/json"),
        ("webhook-signature", "v1,b"),
        ("WEBHOOK-SIGNATURE", "v1,c"),
    ]
    assert normalize_headers(pairs) == {
        "webhook-signature": "v1,a, v1,b, v1,c",
        "content-type": "application/json",
    }
    assert normalize_headers(pairs).getall("webhook-signature") == ["v1,a", "v1,b", "v1,c"]


def test_normalize_headers_joins_names_differing_only_in_case_in_a_mapping() -> None:
    assert normalize_headers({"X-A": "1", "x-a": "2"}) == {"x-a": "1, 2"}


def test_normalize_headers_keeps_empty_values() -> None:
    result = normalize_headers({"x-a": ""})
    assert result == {"x-a": ""}
    assert result.getall("x-a") == [""] and result.getall("x-b") == []
    assert normalize_headers([]) == {}


@pytest.mark.parametrize(
    ("given", "read"),
    [
        ("plain ascii", "plain ascii"),
        ("jÃ©ton â\x98\x95", "jéton ☕"),  # UTF-8 bytes as a server hands them over (latin-1)
        ("jéton", "jéton"),  # text already decoded, or a latin-1 byte that is not UTF-8
        ("jéton ☕", "jéton ☕"),  # past U+00FF: decoded text, kept
        ("\xff\xfe", "\xff\xfe"),  # not UTF-8: kept, one character per byte
    ],
)
def test_header_values_are_read_as_utf8_bytes(given: str, read: str) -> None:
    assert wire_text(given) == read
    assert normalize_headers([("X-Gitlab-Token", given)])["x-gitlab-token"] == read


def test_joined_stripe_signature_headers_still_verify() -> None:
    # Stripe could send two Stripe-Signature lines; joined with ", " they parse as one list.
    body = b'{"id": "evt_1"}'
    sig = hmac.new(b"whsec_x", b"100." + body, hashlib.sha256).hexdigest()
    headers = normalize_headers([("Stripe-Signature", "t=100"), ("Stripe-Signature", f"v1={sig}")])
    Stripe(secret="whsec_x").verify(headers, body, now=100.0)


def test_identity_is_frozen() -> None:
    identity = Identity(event_id="e", event_type=None, occurred_at=None, payload={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        identity.event_id = "f"  # type: ignore[misc]


def test_source_name_defaults_and_is_validated() -> None:
    assert GitHub(secret="s").name == "github"
    assert GitHub(secret="s", name="gh-main").name == "gh-main"
    assert repr(GitHub(secret="s", name="gh-main")) == "GitHub(name='gh-main')"
    for bad in ("a/b", "x" * 65):
        with pytest.raises(ConfigurationError):
            GitHub(secret="s", name=bad)


def test_secret_never_appears_in_repr() -> None:
    assert "hunter2" not in repr(Stripe(secret="whsec_hunter2"))


def test_headers_to_store_keeps_only_known_headers() -> None:
    headers = {
        "stripe-signature": "t=1,v1=00",
        "content-type": "application/json",
        "user-agent": "Stripe/1.0",
        "authorization": "Bearer sk_live_x",
        "cookie": "a=b",
    }
    assert Stripe(secret="whsec_x").headers_to_store(headers) == {
        "stripe-signature": "t=1,v1=00",
        "content-type": "application/json",
        "user-agent": "Stripe/1.0",
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, datetime(1970, 1, 1, tzinfo=UTC)),
        (1_700_000_000.5, datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=UTC)),
        ("2023-11-14T22:13:20Z", datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)),
        (
            "2023-11-15T00:13:20+02:00",
            datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC),
        ),
        ("2023-11-14", datetime(2023, 11, 14, tzinfo=UTC)),
        (True, None),
        (None, None),
        ("", None),
        ("not a date", None),
        (10**20, None),
        (float("inf"), None),
        (float("nan"), None),
        ("9999-12-31T23:59:59-01:00", None),
        ({"t": 1}, None),
    ],
)
def test_parse_time(value: object, expected: datetime | None) -> None:
    parsed = parse_time(value)
    assert parsed == expected
    if parsed is not None:
        assert parsed.utcoffset() == timedelta(0)
        assert parsed.tzinfo is UTC
