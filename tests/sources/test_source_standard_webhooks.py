"""Standard Webhooks: signatures from `standardwebhooks` and `svix`, checked against ours."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
import standardwebhooks
import standardwebhooks.webhooks
import svix
import svix.webhooks
from hypothesis import given, settings
from hypothesis import strategies as st

from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    MissingHeader,
    PayloadError,
    TimestampOutOfTolerance,
    VerificationError,
)
from hookinbox.sources import StandardWebhooks
from hookinbox.sources._standard_webhooks import EXAMPLE_SECRET
from hookinbox.testing import sign as kit_sign

T = 1_700_000_000
NOW = float(T)
KEY = bytes(range(24))
SECRET = "whsec_" + base64.b64encode(KEY).decode()
OLD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # the example secret of the spec
MSG_ID = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
EVENT = {
    "type": "invoice.paid",
    "timestamp": "2023-11-14T22:12:20.123456Z",
    "data": {"id": "in_1", "customer": "Zoë"},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()

Signer = Callable[[str, str, datetime, str], str]


def sign_standardwebhooks(secret: str, msg_id: str, at: datetime, body: str) -> str:
    return standardwebhooks.webhooks.Webhook(secret).sign(msg_id, at, body)


def sign_svix(secret: str, msg_id: str, at: datetime, body: str) -> str:
    return svix.webhooks.Webhook(secret).sign(msg_id, at, body)


SIGNERS = pytest.mark.parametrize(
    "signer", [sign_standardwebhooks, sign_svix], ids=["standardwebhooks", "svix"]
)


def at(timestamp: int) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


def signature(
    body: bytes = BODY,
    *,
    secret: str = SECRET,
    msg_id: str = MSG_ID,
    timestamp: int = T,
    signer: Signer = sign_standardwebhooks,
) -> str:
    return signer(secret, msg_id, at(timestamp), body.decode())


def headers(
    sig: str, *, msg_id: str = MSG_ID, timestamp: int | str = T, prefix: str = "webhook"
) -> dict[str, str]:
    return {
        f"{prefix}-id": msg_id,
        f"{prefix}-timestamp": str(timestamp),
        f"{prefix}-signature": sig,
    }


def verify(
    hdrs: dict[str, str],
    body: bytes = BODY,
    *,
    now: float = NOW,
    secret: str | list[str] = SECRET,
    tolerance: float | None = 300.0,
) -> None:
    StandardWebhooks(secret=secret, tolerance=tolerance).verify(hdrs, body, now=now)


# -- verification ------------------------------------------------------------------------------


@SIGNERS
@pytest.mark.parametrize(
    "body",
    [BODY, b"{}", b"", '{"x": "\u2603 \U0001f600"}'.encode(), b"not even json"],
    ids=["event", "empty-object", "empty", "non-ascii", "not-json"],
)
def test_official_signatures_verify(signer: Signer, body: bytes) -> None:
    verify(headers(signature(body, signer=signer)), body)


@SIGNERS
def test_official_signatures_verify_with_the_spec_example_secret(signer: Signer) -> None:
    sig = signature(secret=OLD_SECRET, signer=signer)
    verify(headers(sig), secret=OLD_SECRET)


def test_both_libraries_sign_alike() -> None:
    assert signature(signer=sign_standardwebhooks) == signature(signer=sign_svix)


@SIGNERS
def test_svix_header_twins_are_accepted(signer: Signer) -> None:
    verify(headers(signature(signer=signer), prefix="svix"))


def test_authenticate_with_svix_headers_reads_svix_id() -> None:
    identity = StandardWebhooks(secret=SECRET).authenticate(
        headers(signature(), prefix="svix"), BODY, now=NOW
    )
    assert identity.event_id == MSG_ID


def test_secret_without_prefix_and_unpadded_is_the_same_key() -> None:
    sig = signature()
    verify(headers(sig), secret=base64.b64encode(KEY).decode())
    unpadded = "whsec_" + base64.b64encode(b"\x01\x02\x03\x04").decode().rstrip("=")
    verify(headers(signature(secret=unpadded)), secret=unpadded)


def test_secret_is_base64_decoded() -> None:
    # A verifier keyed with the text of the secret (as Stripe is) would not match.
    with pytest.raises(BadSignature):
        verify(headers(signature()), secret="whsec_" + base64.b64encode(SECRET.encode()).decode())


@pytest.mark.parametrize("position", [0, 1, 2])
def test_several_signatures_one_matches(position: int) -> None:
    valid = signature()
    decoys = [
        "v1," + base64.b64encode(b"\x00" * 32).decode(),
        signature(secret=OLD_SECRET),
    ]
    entries = [*decoys]
    entries.insert(position, valid)
    verify(headers(" ".join(entries)))
    # v1a entries and unknown versions are ignored, not fatal.
    verify(headers(" ".join(["v1a," + base64.b64encode(b"\x01" * 64).decode(), *entries, "v2,x"])))


def test_malformed_entries_do_not_hide_a_valid_one() -> None:
    valid = signature()
    verify(headers(f"v1,!!notbase64!! v1 ,,, v1,{'A' * 5} {valid} v1,"))


def test_only_wrong_signatures_is_bad_signature() -> None:
    decoys = ["v1," + base64.b64encode(b"\x00" * 32).decode(), signature(secret=OLD_SECRET)]
    with pytest.raises(BadSignature):
        verify(headers(" ".join(decoys)))


@pytest.mark.parametrize(
    "spoil",
    [lambda raw: raw + b"\x00", lambda raw: raw[:-1], lambda raw: raw[:16]],
    ids=["extended", "truncated", "half"],
)
def test_extended_or_truncated_signature_is_bad_signature(spoil: Callable[[bytes], bytes]) -> None:
    raw = base64.b64decode(signature().split(",", 1)[1])
    with pytest.raises(BadSignature):
        verify(headers("v1," + base64.b64encode(spoil(raw)).decode()))


@pytest.mark.parametrize("msg_id", ["\ud800", "msg_\udfff", "\udc80\udc81"])
def test_undecodable_message_id_is_bad_signature(msg_id: str) -> None:
    # A str header can carry lone surrogates (e.g. bytes decoded with surrogateescape);
    # it must be a verification failure, not a UnicodeEncodeError.
    with pytest.raises(BadSignature):
        verify(headers(signature(), msg_id=msg_id))
    with pytest.raises(BadSignature):
        verify(headers(signature(), msg_id=msg_id, prefix="svix"))


def test_v1a_only_is_bad_signature() -> None:
    ed25519_like = "v1a," + base64.b64encode(b"\x07" * 64).decode()
    with pytest.raises(BadSignature):
        verify(headers(ed25519_like))
    # Even when the v1a entry carries the correct HMAC: only v1 means HMAC-SHA256.
    hmac_as_v1a = "v1a," + signature().split(",", 1)[1]
    with pytest.raises(BadSignature):
        verify(headers(hmac_as_v1a))


@pytest.mark.parametrize("sig", ["", "v1", "v1,", "v1,%%%", "garbage", "v2,AAAA", " , "])
def test_no_usable_v1_signature(sig: str) -> None:
    error = MissingHeader if sig == "" else BadSignature
    with pytest.raises(error):
        verify(headers(sig))


def test_secret_rotation() -> None:
    old_signed = headers(signature(secret=OLD_SECRET))
    with pytest.raises(BadSignature):
        verify(old_signed)
    verify(old_signed, secret=[SECRET, OLD_SECRET])
    verify(headers(signature()), secret=[SECRET, OLD_SECRET])


@pytest.mark.parametrize("index", [0, len(BODY) // 2, len(BODY) - 1])
def test_tampered_body_is_bad_signature(index: int) -> None:
    tampered = bytearray(BODY)
    tampered[index] ^= 0x20
    with pytest.raises(BadSignature):
        verify(headers(signature()), bytes(tampered))


def test_signature_binds_message_id_and_timestamp() -> None:
    sig = signature()
    with pytest.raises(BadSignature):
        verify(headers(sig, msg_id=MSG_ID + "x"))
    with pytest.raises(BadSignature):
        verify(headers(sig, timestamp=T + 1))


def test_wrong_secret_is_bad_signature() -> None:
    with pytest.raises(BadSignature):
        verify(headers(signature()), secret=OLD_SECRET)


@pytest.mark.parametrize("missing", ["id", "timestamp", "signature"])
def test_missing_header(missing: str) -> None:
    hdrs = headers(signature())
    del hdrs[f"webhook-{missing}"]
    with pytest.raises(MissingHeader):
        verify(hdrs)
    hdrs[f"webhook-{missing}"] = ""
    with pytest.raises(MissingHeader):
        verify(hdrs)


@pytest.mark.parametrize(
    "timestamp", ["abc", "1.7e9", "1700000000.0", "-1700000000", "+1700000000", "9" * 40, "0x10"]
)
def test_bad_timestamp_is_bad_signature(timestamp: str) -> None:
    with pytest.raises(BadSignature):
        verify(headers(signature(), timestamp=timestamp))


@pytest.mark.parametrize("offset", [-300, 0, 300])
def test_timestamp_within_tolerance(offset: int) -> None:
    verify(headers(signature()), now=NOW + offset)


@pytest.mark.parametrize("offset", [301, 7200, -301, -7200], ids=["old", "older", "new", "newer"])
def test_timestamp_out_of_tolerance(offset: int) -> None:
    with pytest.raises(TimestampOutOfTolerance):
        verify(headers(signature()), now=NOW + offset)


def test_tolerance_none_disables_the_check() -> None:
    verify(headers(signature()), now=NOW + 10**9, tolerance=None)


def test_forged_signature_with_expired_timestamp_is_bad_signature() -> None:
    forged = headers(signature(secret=OLD_SECRET, timestamp=T - 3600), timestamp=T - 3600)
    with pytest.raises(BadSignature):
        verify(forged)


@pytest.mark.parametrize(
    "secret",
    [
        "whsec_not base64!",
        "whsec_@@@@",
        "whsec_",
        "whsec_\u00e9t\u00e9",
        "whsec_A",
        "whsec_abc-_def",
        "",
        [],
        ["whsec_" + base64.b64encode(KEY).decode(), "whsec_%%"],
    ],
)
def test_invalid_secret_is_configuration_error_at_construction(secret: object) -> None:
    with pytest.raises(ConfigurationError):
        StandardWebhooks(secret=secret)  # type: ignore[arg-type]


# -- cross-check with the standardwebhooks library ------------------------------------------------


@contextmanager
def library_clock(now: float) -> Iterator[None]:
    """Pin the wall clock that `standardwebhooks` reads (it takes no `now` argument)."""

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def]
            return datetime.fromtimestamp(now, tz)

    with mock.patch.object(standardwebhooks.webhooks, "datetime", Frozen):
        yield


def library_accepts(hdrs: dict[str, str], body: bytes, secret: str, now: float) -> bool:
    with library_clock(now):
        try:
            standardwebhooks.webhooks.Webhook(secret).verify(body, hdrs, json_parse=False)
        except standardwebhooks.webhooks.WebhookVerificationError:
            return False
    return True


def we_accept(hdrs: dict[str, str], body: bytes, secret: str, now: float) -> bool:
    try:
        verify(hdrs, body, now=now, secret=secret)
    except VerificationError:
        return False
    return True


def test_library_clock_is_pinned() -> None:
    hdrs = headers(signature())
    assert library_accepts(hdrs, BODY, SECRET, NOW)
    assert not library_accepts(hdrs, BODY, SECRET, NOW + 301)
    assert not library_accepts(hdrs, BODY, SECRET, NOW - 301)


@SIGNERS
@pytest.mark.parametrize("offset", [-300, 0, 300])
def test_library_accepts_what_we_accept(signer: Signer, offset: int) -> None:
    hdrs = headers(signature(signer=signer))
    verify(hdrs, now=NOW + offset)
    with library_clock(NOW + offset):
        payload = standardwebhooks.webhooks.Webhook(SECRET).verify(BODY, hdrs)
    assert payload == EVENT


@settings(max_examples=300, deadline=None)
@given(
    body=st.text(max_size=200).map(str.encode),
    key=st.binary(min_size=1, max_size=64),
    msg_id=st.text(st.characters(codec="ascii", exclude_characters=" "), min_size=1, max_size=40),
    offset=st.integers(min_value=-400, max_value=400),
    items=st.lists(
        st.one_of(
            st.sampled_from(["valid", "other-key", "valid-as-v1a"]),
            st.binary(min_size=32, max_size=32).map(lambda b: "v1," + base64.b64encode(b).decode()),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_we_accept_exactly_what_the_library_accepts(
    body: bytes, key: bytes, msg_id: str, offset: int, items: list[str]
) -> None:
    """Differential test on well-formed headers, the library's clock pinned to ours."""
    secret = "whsec_" + base64.b64encode(key).decode()
    valid = signature(body, secret=secret, msg_id=msg_id)
    named = {
        "valid": valid,
        "other-key": signature(body, secret="whsec_" + base64.b64encode(key + b"x").decode()),
        "valid-as-v1a": "v1a," + valid.split(",", 1)[1],
    }
    hdrs = headers(" ".join(named.get(item, item) for item in items), msg_id=msg_id)
    now = NOW + offset
    ours = we_accept(hdrs, body, secret, now)
    assert ours == library_accepts(hdrs, body, secret, now)
    assert ours == ("valid" in items and abs(offset) <= 300)


# -- identification ------------------------------------------------------------------------------


def identify(hdrs: dict[str, str], body: bytes = BODY):  # type: ignore[no-untyped-def]
    return StandardWebhooks(secret=SECRET).identify(hdrs, body)


def test_identify_reads_id_type_and_timestamp() -> None:
    identity = identify(headers(signature()))
    assert identity.event_id == MSG_ID
    assert identity.event_type == "invoice.paid"
    assert identity.occurred_at == datetime(2023, 11, 14, 22, 12, 20, 123456, tzinfo=UTC)
    assert identity.payload == EVENT


def test_key_is_webhook_id_not_timestamp() -> None:
    first = identify(headers(signature(), timestamp=T))
    retry = identify(headers(signature(timestamp=T + 30), timestamp=T + 30))
    assert first.event_id == retry.event_id == MSG_ID


def test_occurred_at_falls_back_to_data_created_at_and_converts_to_utc() -> None:
    body = json.dumps({"type": "x", "data": {"created_at": "2024-01-02T03:04:05+02:00"}}).encode()
    occurred = identify(headers("v1,AAAA"), body).occurred_at
    assert occurred == datetime(2024, 1, 2, 1, 4, 5, tzinfo=UTC)
    assert occurred is not None and occurred.utcoffset() == timedelta(0)


def test_naive_timestamp_is_read_as_utc() -> None:
    body = json.dumps({"timestamp": "2024-01-02T03:04:05"}).encode()
    assert identify(headers("v1,AAAA"), body).occurred_at == datetime(
        2024, 1, 2, 3, 4, 5, tzinfo=UTC
    )


@pytest.mark.parametrize("value", ["soon", "", "0001-01-01T00:00:00+01:00", 1e400])
def test_unreadable_timestamp_is_dropped(value: object) -> None:
    body = json.dumps({"timestamp": value}).encode()
    assert identify(headers("v1,AAAA"), body).occurred_at is None


def test_missing_id_is_payload_error() -> None:
    with pytest.raises(PayloadError):
        identify({"webhook-timestamp": str(T)})
    with pytest.raises(PayloadError):
        identify({"webhook-id": "x" * 256})


@pytest.mark.parametrize("body", [b"[]", b'[{"type": "x"}]', b"not json", b"", b"\x80", b"1"])
def test_non_object_body_is_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        identify(headers("v1,AAAA"), body)


def test_signed_non_json_body_authenticates_to_payload_error() -> None:
    body = b"plain text"
    with pytest.raises(PayloadError):
        StandardWebhooks(secret=SECRET).authenticate(headers(signature(body)), body, now=NOW)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


@pytest.mark.parametrize("library", [standardwebhooks.Webhook, svix.Webhook])
def test_the_kits_signer_is_verified_by_the_standard_webhooks_libraries(library: Any) -> None:
    source = StandardWebhooks(secret=EXAMPLE_SECRET)
    headers, body = kit_sign(source, KIT_EVENT)
    library(EXAMPLE_SECRET).verify(body, headers)  # raises unless it verifies
    forged, _ = kit_sign(source, KIT_EVENT, secret="whsec_" + base64.b64encode(b"x" * 24).decode())
    with pytest.raises(Exception, match=r"(?i)signature"):
        library(EXAMPLE_SECRET).verify(body, forged)
