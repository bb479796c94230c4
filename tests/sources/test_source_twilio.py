"""Twilio: signatures from Twilio's own `RequestValidator`, checked by ours (form and JSON)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.testing.npm_oracles import npm_verifies
from twilio.request_validator import RequestValidator
from werkzeug.datastructures import MultiDict as WerkzeugMultiDict

from hookinbox import Inbox
from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    MissingHeader,
    PayloadError,
    VerificationError,
)
from hookinbox.sources import Twilio
from hookinbox.testing import sign as kit_sign

NOW = 1_700_000_000.0
TOKEN = "12345abcdef12345abcdef12345abcde"
URL = "https://example.com/webhooks/twilio"
FORM = "application/x-www-form-urlencoded"
STATUS: dict[str, str] = {
    "AccountSid": "ACXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
    "ApiVersion": "2010-04-01",
    "From": "+15017122661",
    "To": "+15558675310",
    "MessageSid": "SM1342fe1b2c904d1ab04f0fc7a58abca9",
    "SmsSid": "SM1342fe1b2c904d1ab04f0fc7a58abca9",
    "MessageStatus": "delivered",
    "SmsStatus": "delivered",
    "Body": "Zoë says hi & bye+1",
}
CALL: dict[str, str] = {
    "AccountSid": "ACXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
    "CallSid": "CA5f8d5b3c4a1e2d3f4a5b6c7d8e9f0a1b",
    "CallStatus": "completed",
    "SequenceNumber": "3",
    "CallDuration": "42",
}


def form_delivery(
    params: dict[str, str] | list[tuple[str, str]],
    *,
    url: str = URL,
    token: str = TOKEN,
    **headers: str,
) -> tuple[dict[str, str], bytes]:
    """A form delivery, the signature computed by Twilio's own validator."""
    body = urlencode(params).encode()
    validator_params: Any = params
    if isinstance(params, list):  # a repeated field: the validator takes a multi-dict
        validator_params = MultiDict(params)
    signature = RequestValidator(token).compute_signature(url, validator_params)
    return {"x-twilio-signature": signature, "content-type": FORM, **headers}, body


def json_delivery(
    payload: Any, *, url: str = URL, token: str = TOKEN, algorithm: str | None = None
) -> tuple[dict[str, str], bytes]:
    """A JSON delivery: Twilio signs the URL with `bodySHA256` of the body in its query."""
    body = json.dumps(payload).encode()
    digest = hashlib.sha256(body).hexdigest()
    signed_url = f"{url}{'&' if '?' in url else '?'}bodySHA256={digest}"
    signature = RequestValidator(token).compute_signature(signed_url, {}, algorithm)
    headers = {"x-twilio-signature": signature, "content-type": "application/json"}
    if algorithm:
        headers["x-twilio-webhooks-signature-settings"] = f"key=webhooks_sk_1,algorithm={algorithm}"
    return headers, body


class MultiDict(dict[str, str]):
    """Just enough of Werkzeug's MultiDict for the validator: `getall` returns every value."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs

    def getall(self, name: str) -> list[str]:
        return [v for n, v in self.pairs if n == name]


def source(**options: Any) -> Twilio:
    return Twilio(secret=options.pop("secret", TOKEN), url=options.pop("url", URL), **options)


# -- form bodies ---------------------------------------------------------------------------------


def test_a_status_callback_verifies_and_twilio_agrees() -> None:
    headers, body = form_delivery(STATUS)
    source().verify(headers, body, now=NOW)
    assert RequestValidator(TOKEN).validate(URL, STATUS, headers["x-twilio-signature"])


def test_repeated_fields_are_signed_as_twilio_signs_them() -> None:
    pairs = [("MediaUrl", "https://b.example"), ("MediaUrl", "https://a.example"), ("To", "+1")]
    headers, body = form_delivery(pairs)
    source().verify(headers, body, now=NOW)
    identity = source(key_fields=["To"]).identify(headers, body)
    assert identity.payload == {"MediaUrl": ["https://b.example", "https://a.example"], "To": "+1"}


def test_field_order_in_the_body_does_not_matter() -> None:
    headers, body = form_delivery(STATUS)
    reordered = urlencode(sorted(STATUS.items(), reverse=True)).encode()
    assert reordered != body
    source().verify(headers, reordered, now=NOW)


@pytest.mark.parametrize(
    ("configured", "signed"),
    [
        (URL, "https://example.com:443/webhooks/twilio"),
        ("https://example.com:443/webhooks/twilio", URL),
        ("http://example.com:8080/hook?x=1", "http://example.com:8080/hook?x=1"),
        ("https://user:pass@example.com/webhooks/twilio", URL),
        (URL + "#rc=3&rp=all", URL),
    ],
    ids=[
        "signed-with-port",
        "configured-with-port",
        "other-port-and-query",
        "credentials",
        "connection-overrides",
    ],
)
def test_url_forms_twilio_may_sign(configured: str, signed: str) -> None:
    headers, body = form_delivery(STATUS, url=signed)
    source(url=configured).verify(headers, body, now=NOW)


@pytest.mark.parametrize(
    "signed",
    [URL + "/", "http://example.com/webhooks/twilio", URL + "?x=1", "https://example.com:8443/x"],
)
def test_another_url_is_bad_signature(signed: str) -> None:
    headers, body = form_delivery(STATUS, url=signed)
    with pytest.raises(BadSignature):
        source().verify(headers, body, now=NOW)


def test_changed_field_wrong_token_and_rotation() -> None:
    headers, body = form_delivery(STATUS)
    with pytest.raises(BadSignature):
        source().verify(headers, body.replace(b"delivered", b"failed", 1), now=NOW)
    other_headers, other_body = form_delivery(STATUS, token="old-token")
    with pytest.raises(BadSignature):
        source().verify(other_headers, other_body, now=NOW)
    source(secret=[TOKEN, "old-token"]).verify(other_headers, other_body, now=NOW)


def test_non_utf8_form_is_bad_signature() -> None:
    headers, _ = form_delivery(STATUS)
    with pytest.raises(BadSignature, match="not UTF-8"):
        source().verify(headers, b"Body=\xff\xfe", now=NOW)


def test_missing_and_malformed_signature() -> None:
    headers, body = form_delivery(STATUS)
    with pytest.raises(MissingHeader):
        source().verify({"content-type": FORM}, body, now=NOW)
    with pytest.raises(BadSignature, match="not base64"):
        source().verify({**headers, "x-twilio-signature": "not base64!"}, body, now=NOW)


# -- JSON bodies and shared-key (SHA-256) signatures ---------------------------------------------


@pytest.mark.parametrize("url", [URL, URL + "?tenant=7"], ids=["plain", "with-query"])
def test_a_json_body_verifies_through_body_sha256(url: str) -> None:
    headers, body = json_delivery({"id": "EZ1", "type": "x"}, url=url)
    source(url=url).verify(headers, body, now=NOW)
    digest = hashlib.sha256(body).hexdigest()
    signed_url = f"{url}{'&' if '?' in url else '?'}bodySHA256={digest}"
    assert RequestValidator(TOKEN).validate(
        signed_url, body.decode(), headers["x-twilio-signature"]
    )
    with pytest.raises(BadSignature):
        source(url=url).verify(headers, body.replace(b"EZ1", b"EZ2"), now=NOW)


def test_sha256_shared_key_signatures() -> None:
    headers, body = json_delivery({"id": "EZ1"}, algorithm="HMAC_SHA256")
    source().verify(headers, body, now=NOW)
    # The same signature claimed as SHA-1 does not match.
    with pytest.raises(BadSignature):
        source().verify({**headers, "x-twilio-webhooks-signature-settings": ""}, body, now=NOW)
    unknown = {**headers, "x-twilio-webhooks-signature-settings": "algorithm=HMAC_MD5"}
    with pytest.raises(BadSignature, match="unsupported"):
        source().verify(unknown, body, now=NOW)


@settings(max_examples=150, deadline=None)
@given(
    params=st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=12), max_size=6),
    valid=st.booleans(),
)
def test_we_accept_exactly_what_twilio_accepts(params: dict[str, str], valid: bool) -> None:
    headers, body = form_delivery(params, token=TOKEN if valid else TOKEN + "x")
    try:
        source().verify(headers, body, now=NOW)
        ours = True
    except VerificationError:
        ours = False
    twilios = RequestValidator(TOKEN).validate(URL, params, headers["x-twilio-signature"])
    assert ours == twilios == valid


# -- keys ----------------------------------------------------------------------------------------


def test_the_idempotency_token_is_the_key_when_sent() -> None:
    headers, body = form_delivery(STATUS, **{"i-twilio-idempotency-token": "a1b2-c3d4"})
    identity = source().authenticate(headers, body, now=NOW)
    assert identity.event_id == "a1b2-c3d4"
    assert identity.event_type == "message.delivered"


def test_a_message_status_callback_is_keyed_by_sid_and_status() -> None:
    headers, body = form_delivery(STATUS)
    identity = source().authenticate(headers, body, now=NOW)
    assert identity.event_id == "SM1342fe1b2c904d1ab04f0fc7a58abca9:delivered"
    assert identity.payload == STATUS
    sent = {**STATUS, "MessageStatus": "sent", "SmsStatus": "sent"}
    headers, body = form_delivery(sent)
    assert source().identify(headers, body).event_id.endswith(":sent")


def test_an_incoming_message_is_keyed_by_its_sms_status() -> None:
    incoming = {k: v for k, v in STATUS.items() if k != "MessageStatus"} | {"SmsStatus": "received"}
    headers, body = form_delivery(incoming)
    identity = source().identify(headers, body)
    assert identity.event_id == "SM1342fe1b2c904d1ab04f0fc7a58abca9:received"
    assert identity.event_type == "message.received"


def test_a_call_status_callback_is_keyed_by_sid_status_and_sequence() -> None:
    headers, body = form_delivery(CALL)
    identity = source().identify(headers, body)
    assert identity.event_id == "CA5f8d5b3c4a1e2d3f4a5b6c7d8e9f0a1b:completed:3"
    assert identity.event_type == "call.completed"


def test_key_fields_replace_the_rules() -> None:
    recording = {"RecordingSid": "RE1", "RecordingStatus": "completed", "CallSid": "CA1"}
    headers, body = form_delivery(recording)
    with pytest.raises(PayloadError):  # CallSid without CallStatus
        source().identify(headers, body)
    identity = source(key_fields=["RecordingSid", "RecordingStatus"]).identify(headers, body)
    assert identity.event_id == "RE1:completed"
    with pytest.raises(PayloadError, match="RecordingStatus"):
        source(key_fields=["RecordingSid", "RecordingStatus"]).identify(
            *form_delivery({"RecordingSid": "RE1"})
        )


def test_a_json_body_is_keyed_by_its_id() -> None:
    event = {"id": "EZ1a2b", "type": "com.twilio.messaging.message.delivered", "data": {}}
    headers, body = json_delivery(event)
    identity = source().authenticate(headers, body, now=NOW)
    assert (identity.event_id, identity.event_type) == ("EZ1a2b", event["type"])
    with pytest.raises(PayloadError):
        source().identify(*json_delivery([event]))  # a batch without the token header


@pytest.mark.parametrize(
    "params",
    [{"Foo": "bar"}, {"MessageSid": "SM1"}, {"MessageSid": "SM1", "MessageStatus": "a\nb"}],
    ids=["nothing-to-key-by", "no-status", "unprintable"],
)
def test_no_usable_key_is_payload_error(params: dict[str, str]) -> None:
    with pytest.raises(PayloadError):
        source().identify(*form_delivery(params))


def test_a_body_neither_json_nor_form_is_payload_error() -> None:
    with pytest.raises(PayloadError, match="not valid JSON"):
        source().identify({"content-type": "text/plain"}, b"MessageSid=SM1")


@pytest.mark.parametrize(
    "options",
    [
        {"url": "example.com/x"},
        {"url": "https://example.com:notaport/x"},
        {"key_fields": []},
        {"key_fields": "MessageSid"},
        {"key_fields": ["MessageSid", ""]},
    ],
)
def test_bad_configuration(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        source(**options)


def test_handlers_read_a_form_body_as_fields(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path / 'twilio.db'}")
    inbox.add_source(source())
    headers, body = form_delivery(STATUS)
    assert inbox.receive("twilio", headers, body).body["status"] == "accepted"
    assert inbox.receive("twilio", headers, body).body["status"] == "duplicate"
    event = inbox.store.get_event("twilio", "SM1342fe1b2c904d1ab04f0fc7a58abca9:delivered")
    assert event is not None
    assert event.body == body  # stored exactly as received, so it can be verified again
    assert event.payload == STATUS
    inbox.close()


# -- the escaped-query URL form (twilio-node's "legacy querystring") ---------------------------

QUERY_URL = "https://example.com/webhooks/twilio?sites=north,south&next=/done&note=a+b%21"
# Node's querystring.stringify of the parsed query: `,` and `/` escaped, `+` a space (%20).
ESCAPED_URL = "https://example.com/webhooks/twilio?sites=north%2Csouth&next=%2Fdone&note=a%20b!"


@pytest.mark.parametrize("signed", [QUERY_URL, ESCAPED_URL], ids=["as-configured", "escaped"])
def test_both_query_forms_verify_as_twilio_node_accepts_them(signed: str, npm: Path) -> None:
    headers, body = form_delivery(STATUS, url=signed)
    assert npm_verifies(npm, "twilio", TOKEN, headers, body, url=QUERY_URL)["valid"]
    source(url=QUERY_URL).verify(headers, body, now=NOW)
    json_headers, json_body = json_delivery({"id": "EZ1"}, url=signed)
    called = f"{QUERY_URL}&bodySHA256={hashlib.sha256(json_body).hexdigest()}"
    assert npm_verifies(npm, "twilio", TOKEN, json_headers, json_body, url=called)["valid"]
    source(url=QUERY_URL).verify(json_headers, json_body, now=NOW)


@pytest.mark.parametrize(
    ("configured", "escaped"),
    [
        ("https://example.com/t?b=2&a=1&b=3", "https://example.com/t?b=2&b=3&a=1"),
        ("https://example.com/t?2=x&1=y&z", "https://example.com/t?1=y&2=x&z="),
        ("https://example.com/t?q=%zz&r=é", "https://example.com/t?q=%25zz&r=%C3%A9"),
    ],
    ids=["repeated-key-grouped", "index-keys-first", "malformed-escape-and-utf8"],
)
def test_the_escaped_form_follows_node_querystring(
    configured: str, escaped: str, npm: Path
) -> None:
    headers, body = form_delivery(STATUS, url=escaped)
    assert npm_verifies(npm, "twilio", TOKEN, headers, body, url=configured)["valid"]
    source(url=configured).verify(headers, body, now=NOW)


def test_another_escaping_is_still_bad_signature(npm: Path) -> None:
    headers, body = form_delivery(STATUS, url=QUERY_URL.replace(",", "%2c"))
    assert not npm_verifies(npm, "twilio", TOKEN, headers, body, url=QUERY_URL)["valid"]
    with pytest.raises(BadSignature):
        source(url=QUERY_URL).verify(headers, body, now=NOW)


@pytest.mark.parametrize(
    ("configured", "signed"),
    [
        ("https://example.com/t?name=O'Brien", "https://example.com/t?name=O%27Brien"),
        ('https://example.com/t?q="x"', "https://example.com/t?q=%22x%22"),
        (
            "https://example.com/caf\u00e9?city=z\u00fcrich",
            "https://example.com/caf%C3%A9?city=z%C3%BCrich",
        ),
        ("https://Example.COM/t?a=1", "https://example.com/t?a=1"),
        ("https://example.com?a=1", "https://example.com/?a=1"),
    ],
    ids=["apostrophe", "quotes", "non-ascii", "host-case", "empty-path"],
)
def test_the_url_as_new_url_writes_it_verifies(configured: str, signed: str, npm: Path) -> None:
    """twilio-node also checks the URL as WHATWG's `new URL()` writes it (and that form with
    the escaped query): `'` and `"` escaped in the query, non-ASCII as UTF-8, the host in
    lower case, an empty path as `/`."""
    headers, body = form_delivery(STATUS, url=signed)
    assert npm_verifies(npm, "twilio", TOKEN, headers, body, url=configured)["valid"]
    source(url=configured).verify(headers, body, now=NOW)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}

KIT_URL = "https://example.com/webhooks/twilio"


@pytest.mark.parametrize("algorithm", ["HMAC_SHA1", "HMAC_SHA256"])
def test_the_kits_forms_are_verified_by_twilios_sdk(algorithm: str) -> None:
    # Repeated and blank fields: Twilio's order is names sorted, then each name's values.
    params = {"MessageSid": "SM1", "MessageStatus": "delivered", "To": ["+2", "+1"], "Body": ""}
    headers, body = kit_sign(Twilio(secret="tw-token", url=KIT_URL), params, algorithm=algorithm)
    assert body.startswith(b"MessageSid=SM1&")
    form = WerkzeugMultiDict(parse_qsl(body.decode(), keep_blank_values=True))  # as Flask has it
    if algorithm == "HMAC_SHA1":
        assert RequestValidator("tw-token").validate(KIT_URL, form, headers["X-Twilio-Signature"])
        assert not RequestValidator("other").validate(KIT_URL, form, headers["X-Twilio-Signature"])
    else:  # the SDK computes SHA-1 only; SHA-256 signs the same text: recompute it
        signed = KIT_URL + "".join(
            name + value
            for name in sorted(params)
            for value in sorted(
                set(params[name] if isinstance(params[name], list) else [params[name]])
            )
        )
        digest = hmac.new(b"tw-token", signed.encode(), hashlib.sha256).digest()
        assert headers["X-Twilio-Signature"] == base64.b64encode(digest).decode()
        assert headers["X-Twilio-Webhooks-Signature-Settings"] == "algorithm=HMAC_SHA256"


def test_the_kits_json_bodies_are_verified_by_twilios_sdk() -> None:
    source = Twilio(secret="tw-token", url=KIT_URL)
    headers, body = kit_sign(source, KIT_EVENT, content_type="application/json")
    url = f"{KIT_URL}?bodySHA256={hashlib.sha256(body).hexdigest()}"
    assert RequestValidator("tw-token").validate(url, body.decode(), headers["X-Twilio-Signature"])
