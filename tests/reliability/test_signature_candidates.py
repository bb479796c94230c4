"""Signature candidates do not multiply what a body costs to verify (issue 31, item 3).

An unsigned 1 MiB body with 16 candidates cost 14 times the CPU of one where each candidate
made the source hash the whole body again: Ed25519 (its hash covers the signature's own R,
so nothing is shared between candidates) and Stripe-style headers with a `t=` group per
candidate (each timestamp is another signed message). ECDSA (SendGrid) now hashes the body
once and checks each candidate against that digest, which is the same outcome, so it is held
by the benchmark (`bench/signature_candidates.py`, figures in bench/README.md); what changed
in what is accepted is held here:
- at most `MAX_EXPENSIVE_CANDIDATES` (2) distinct Ed25519 or ECDSA signatures per delivery:
  one per key a sender signs with while it rotates; a third distinct one is refused (401)
  before any is checked, and the same signature repeated (a header a proxy doubled) counts
  once;
- at most 2 distinct timestamps among a `t=...,v1=...` header's groups (Stripe, Paddle,
  WorkOS, Calendly); groups with one timestamp share its one HMAC per secret, so 16 of them
  still verify.
"""

from __future__ import annotations

import base64

import pytest

from hookinbox._errors import BadSignature
from hookinbox._headers import normalize_headers
from hookinbox.sources import (
    Calendly,
    Discord,
    Paddle,
    SendGrid,
    StandardWebhooks,
    Stripe,
    WorkOS,
)
from hookinbox.sources._signatures import MAX_EXPENSIVE_CANDIDATES, MAX_SIGNATURES
from hookinbox.testing import ed25519_test_key
from tests.reliability._report import Trial, record
from tests.reliability._source_kinds import KINDS, NOW, Kind, status

TIMESTAMPED_LISTS = (Stripe, Paddle, WorkOS, Calendly)


def _kind(cls: type) -> Kind:
    (kind,) = [k for k in KINDS if k.cls is cls]
    return kind


def test_public_key_signatures_are_capped_at_two_distinct() -> None:
    discord = _kind(Discord)
    source = discord.build([discord.secrets[1]])
    right = discord.sign(discord.secrets[1], discord.body, NOW)
    wrong = [discord.sign(s, discord.body, NOW) for s in (discord.secrets[0], discord.secrets[2])]
    assert status(source, discord.assemble([wrong[0], right], NOW), discord.body) == 200
    assert status(source, discord.assemble([right] * MAX_SIGNATURES, NOW), discord.body) == 200
    three = discord.assemble([*wrong, right], NOW)
    assert status(source, three, discord.body) == 401
    with pytest.raises(BadSignature, match=f"more than {MAX_EXPENSIVE_CANDIDATES} Ed25519 sig"):
        source.authenticate(normalize_headers(three), discord.body, now=NOW)
    record(
        Trial(
            fault="three distinct Ed25519 signatures in one header (Discord)",
            backend="-",
            deliveries=3,
            detail="2 distinct with the right one: 200; the right one 16 times: 200 (counted "
            "once); 3 distinct with the right one last: 401 before any is checked",
        )
    )


def test_ecdsa_signatures_are_capped_at_two_distinct() -> None:
    sendgrid = _kind(SendGrid)
    source = sendgrid.build([sendgrid.secrets[1]])
    right = sendgrid.sign(sendgrid.secrets[1], sendgrid.body, NOW)
    wrong = [
        sendgrid.sign(s, sendgrid.body, NOW) for s in (sendgrid.secrets[0], sendgrid.secrets[2])
    ]
    assert status(source, sendgrid.assemble([wrong[0], right], NOW), sendgrid.body) == 200
    assert status(source, sendgrid.assemble([right] * MAX_SIGNATURES, NOW), sendgrid.body) == 200
    three = sendgrid.assemble([*wrong, right], NOW)
    with pytest.raises(BadSignature, match=f"more than {MAX_EXPENSIVE_CANDIDATES} ECDSA"):
        source.authenticate(normalize_headers(three), sendgrid.body, now=NOW)


def test_standard_webhooks_v1a_is_capped_and_v1_is_not() -> None:
    key = ed25519_test_key()
    source = StandardWebhooks(secret="whsec_" + "c2VjcmV0LWtleQ==", public_key=key.whpk)
    body = b'{"type":"invoice.paid"}'
    signed = f"msg_cap.{NOW}.".encode() + body

    def v1a(message: bytes) -> str:
        return "v1a," + base64.b64encode(key.private_key.sign(message)).decode()

    right, others = v1a(signed), [v1a(signed + b"x"), v1a(signed + b"y")]

    def headers(*entries: str) -> dict[str, str]:
        return {
            "webhook-id": "msg_cap",
            "webhook-timestamp": str(NOW),
            "webhook-signature": " ".join(entries),
        }

    assert status(source, headers(others[0], right), body) == 200
    assert status(source, headers(*others, right), body) == 401
    v1_wrong = ["v1,AAAA" + str(n) for n in range(MAX_SIGNATURES - 2)]
    assert status(source, headers(*v1_wrong, others[0], right), body) == 200


@pytest.mark.parametrize("cls", TIMESTAMPED_LISTS, ids=lambda c: c.__name__)
def test_a_list_header_is_capped_at_two_distinct_timestamps(cls: type) -> None:
    kind = _kind(cls)
    source = kind.build([kind.secrets[0]])
    right = kind.headers([kind.secrets[0]])
    (name,) = right
    wrong_entry = kind.sign(kind.secrets[2], kind.body, NOW)

    def group(at: int, entry: str) -> str:
        return kind.assemble([entry], at)[name]

    separator = ";" if cls is Paddle else ","
    two = separator.join([group(NOW - 1, wrong_entry), right[name]])
    three = separator.join([group(NOW - 2, wrong_entry), group(NOW - 1, wrong_entry), right[name]])
    same_time = separator.join([*[group(NOW, wrong_entry)] * (MAX_SIGNATURES - 1), right[name]])
    assert status(source, {name: two}, kind.body) == 200
    assert status(source, {name: three}, kind.body) == 401
    assert status(source, {name: same_time}, kind.body) == 200
    with pytest.raises(BadSignature, match=f"more than {MAX_EXPENSIVE_CANDIDATES} timestamps"):
        source.authenticate(normalize_headers({name: three}), kind.body, now=NOW)
