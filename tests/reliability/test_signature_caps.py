"""Signature headers are bounded before any HMAC: size and candidate count, every source class.

What it proves (issue 19, item 4):
- every signed source class names the headers its signatures travel in (`signature_headers`),
  and a value longer than `MAX_SIGNATURE_HEADER` in any of them is refused (401) without
  `verify` running at all;
- a header listing more than `MAX_SIGNATURES` signature entries is refused, even with the right
  one among them; `MAX_SIGNATURES` entries still verify;
- over HTTP, a real `hookinbox serve` refuses a `Stripe-Signature` of 100,000 `v1` entries
  (6.5 MiB, the right one last) with 401, where it used to compare every one and accept.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookinbox._headers import normalize_headers
from hookinbox.sources import Source
from hookinbox.sources._signatures import MAX_SIGNATURE_HEADER, MAX_SIGNATURES
from tests.apps import basic
from tests.reliability._report import Trial, record
from tests.reliability._source_kinds import KINDS, NOW, Kind, status
from tests.support.server import running_server


def _source(kind: Kind) -> Source:
    return kind.build([kind.secrets[0]])


def _signature_header_names(kind: Kind) -> set[str]:
    """The headers that change with the secret: where this kind's signatures travel."""
    first = normalize_headers(kind.headers([kind.secrets[0]]))
    other = normalize_headers(kind.headers([kind.secrets[1]]))
    return {name for name in first if first[name] != other.get(name)}


def test_every_source_class_names_its_signature_headers() -> None:
    missing = {
        kind.name: sorted(_signature_header_names(kind) - set(_source(kind).signature_headers))
        for kind in KINDS
    }
    assert {name: names for name, names in missing.items() if names} == {}


def test_an_oversized_signature_header_is_refused_before_verify(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refused, verified = 0, []

    def spy(name: str) -> Any:
        return lambda *_args, **_kwargs: verified.append(name)

    for kind in KINDS:
        source = _source(kind)
        headers = normalize_headers(kind.headers([kind.secrets[0]]))
        assert status(source, headers, kind.body) == 200, kind.name
        monkeypatch.setattr(source, "verify", spy(kind.name))  # any call is a failure
        for name in source.signature_headers:
            if name not in headers:
                continue
            # The right value first, padded past the cap: a parser would still find it.
            padded = {**headers, name: headers[name] + " " + "0" * MAX_SIGNATURE_HEADER}
            assert status(source, padded, kind.body) == 401, (kind.name, name)
            refused += 1
    assert verified == [], "verify ran on an oversized header"
    record(
        Trial(
            fault=f"signature header past {MAX_SIGNATURE_HEADER} characters (every source class)",
            backend="-",
            deliveries=refused,
            detail=f"{len(KINDS)} classes, every header they verify with padded after the right "
            "value: all 401, verify never called",
        )
    )


def test_more_signature_entries_than_the_cap_are_refused() -> None:
    several = [kind for kind in KINDS if kind.several]
    assert several, "no source class carries several signatures"
    tried = 0
    for kind in several:
        source = _source(kind)
        right = kind.sign(kind.secrets[0], kind.body, NOW)
        wrong = kind.sign(kind.secrets[2], kind.body, NOW)
        at_cap = kind.assemble([*[wrong] * (MAX_SIGNATURES - 1), right], NOW)
        past_cap = kind.assemble([*[wrong] * MAX_SIGNATURES, right], NOW)
        assert status(source, at_cap, kind.body) == 200, kind.name
        assert status(source, past_cap, kind.body) == 401, kind.name
        tried += 2
    record(
        Trial(
            fault=f"more than {MAX_SIGNATURES} signatures in one header",
            backend="-",
            deliveries=tried,
            detail=f"{len(several)} list formats ({', '.join(k.name for k in several)}): "
            f"{MAX_SIGNATURES} entries with the right one last verify, "
            f"{MAX_SIGNATURES + 1} are refused 401",
        )
    )


ENTRIES = 100_000


def _stripe_delivery(event_id: str, at: int, junk: int) -> tuple[dict[str, str], bytes]:
    """A Stripe delivery whose header lists `junk` wrong `v1` entries, then the right one."""
    body = json.dumps({"id": event_id, "type": "invoice.paid", "created": at}).encode()
    key = basic.STRIPE_SECRET.encode()
    right = hmac.new(key, f"{at}.".encode() + body, hashlib.sha256).hexdigest()
    entries = ["v1=" + "0" * 64] * junk
    return {"Stripe-Signature": ",".join([f"t={at}", *entries, f"v1={right}"])}, body


@pytest.mark.slow
def test_a_stripe_signature_of_100000_entries_is_refused_over_http(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'inbox.db'}"
    with running_server("tests.apps.basic:inbox", database_url, "--no-worker") as base_url:
        with httpx.Client(base_url=base_url, timeout=60) as client:
            headers, body = _stripe_delivery("evt_huge_header", int(time.time()), ENTRIES)
            size = len(headers["Stripe-Signature"])
            huge = client.post("/webhooks/stripe", headers=headers, content=body)
            health = client.get("/healthz")
            headers, body = _stripe_delivery("evt_huge_header", int(time.time()), 1)
            accepted = client.post("/webhooks/stripe", headers=headers, content=body)
    assert huge.status_code == 401, huge.text
    assert health.status_code == 200
    assert accepted.status_code == 200, accepted.text
    record(
        Trial(
            fault=f"Stripe-Signature of {ENTRIES:,} v1 entries, the right one last",
            backend="sqlite",
            deliveries=2,
            detail=f"{size / 2**20:.1f} MiB header: 401 before any HMAC; /healthz 200; "
            "the same event with its one signature: 200",
        )
    )
