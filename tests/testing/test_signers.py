"""Every signer of `hookinbox.testing.sign` agrees with the provider's official verifier.

Where the provider publishes an SDK that verifies, that SDK is the judge (PyPI's, or npm's for
GitHub, Shopify and Linear; `workos` for WorkOS); where none verifies (Mollie, Lemon Squeezy,
PayPal offline, GitLab's token, Calendly, Intercom, Typeform, Mailgun, Postmark's
credentials), the documented recipe is recomputed here, and GitHub's published vector is
checked.
Each signer is also checked against hookinbox's own source, and against a wrong secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pytest
import standardwebhooks
import stripe
import svix
import workos
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from paddle_billing.Notifications import Secret, Verifier
from slack_sdk.signature import SignatureVerifier
from square.utils.webhooks_helper import verify_signature as square_verifies
from twilio.request_validator import RequestValidator
from werkzeug.datastructures import MultiDict

from hookinbox import BadSignature
from hookinbox.sources import (
    Calendly,
    GitHub,
    GitLab,
    GitLabSigned,
    HMACSource,
    Intercom,
    LemonSqueezy,
    Linear,
    Mailgun,
    Mollie,
    MollieClassic,
    Paddle,
    PayPal,
    Postmark,
    Shopify,
    Slack,
    Source,
    Square,
    StandardWebhooks,
    Stripe,
    Twilio,
    Typeform,
    WorkOS,
)
from hookinbox.sources._base import normalize_headers
from hookinbox.testing import paypal_test_certificate, sign
from tests.testing.npm_oracles import npm_verifies, oracle_dir

STANDARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # the Standard Webhooks spec's example
SQUARE_URL = "https://example.com/webhooks/square?shop=1"
TWILIO_URL = "https://example.com/webhooks/twilio"
EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


class PaddleRequest:
    def __init__(self, headers: dict[str, str], body: bytes) -> None:
        self.headers = headers
        self.body = self.content = self.data = body


@pytest.fixture(scope="module")
def npm() -> Iterator[Path]:
    yield oracle_dir()


def test_stripe_sdk_verifies() -> None:
    headers, body = sign(Stripe(secret="whsec_test"), EVENT)
    event = stripe.Webhook.construct_event(body, headers["Stripe-Signature"], "whsec_test")
    assert event["id"] == "evt_1"
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.Webhook.construct_event(body, headers["Stripe-Signature"], "whsec_other")


@pytest.mark.parametrize("library", [standardwebhooks.Webhook, svix.Webhook])
def test_standard_webhooks_libraries_verify(library: Any) -> None:
    for source in (StandardWebhooks(secret=STANDARD_SECRET), GitLabSigned(secret=STANDARD_SECRET)):
        headers, body = sign(source, EVENT)
        library(STANDARD_SECRET).verify(body, headers)  # raises unless it verifies
        forged, _ = sign(source, EVENT, secret="whsec_" + base64.b64encode(b"x" * 24).decode())
        with pytest.raises(Exception, match=r"(?i)signature"):
            library(STANDARD_SECRET).verify(body, forged)


def test_paddle_sdk_verifies() -> None:
    headers, body = sign(Paddle(secret="pdl_ntfset_1"), EVENT)
    assert Verifier().verify(PaddleRequest(headers, body), Secret("pdl_ntfset_1"))
    assert not Verifier().verify(PaddleRequest(headers, body), Secret("pdl_ntfset_2"))


def test_slack_sdk_verifies() -> None:
    headers, body = sign(Slack(secret="8f742231b10e8888abcd99yyyzzz85a5"), EVENT, retry=1)
    assert SignatureVerifier("8f742231b10e8888abcd99yyyzzz85a5").is_valid_request(body, headers)
    assert not SignatureVerifier("another").is_valid_request(body, headers)
    assert headers["X-Slack-Retry-Num"] == "1"


def test_square_sdk_verifies() -> None:
    headers, body = sign(Square(secret="sq-key", notification_url=SQUARE_URL), EVENT)
    signature = headers["x-square-hmacsha256-signature"]
    check = {"request_body": body.decode(), "signature_header": signature}
    assert square_verifies(**check, signature_key="sq-key", notification_url=SQUARE_URL)
    assert not square_verifies(**check, signature_key="other", notification_url=SQUARE_URL)


@pytest.mark.parametrize("algorithm", ["HMAC_SHA1", "HMAC_SHA256"])
def test_twilio_sdk_verifies_forms(algorithm: str) -> None:
    # Repeated and blank fields: Twilio's order is names sorted, then each name's values.
    params = {"MessageSid": "SM1", "MessageStatus": "delivered", "To": ["+2", "+1"], "Body": ""}
    headers, body = sign(Twilio(secret="tw-token", url=TWILIO_URL), params, algorithm=algorithm)
    assert body.startswith(b"MessageSid=SM1&")
    form = MultiDict(parse_qsl(body.decode(), keep_blank_values=True))  # as a framework parses it
    if algorithm == "HMAC_SHA1":
        assert RequestValidator("tw-token").validate(
            TWILIO_URL, form, headers["X-Twilio-Signature"]
        )
        assert not RequestValidator("other").validate(
            TWILIO_URL, form, headers["X-Twilio-Signature"]
        )
    else:  # the SDK computes SHA-1 only; SHA-256 signs the same text: recompute it
        signed = TWILIO_URL + "".join(
            name + value
            for name in sorted(params)
            for value in sorted(
                set(params[name] if isinstance(params[name], list) else [params[name]])
            )
        )
        digest = hmac.new(b"tw-token", signed.encode(), hashlib.sha256).digest()
        assert headers["X-Twilio-Signature"] == base64.b64encode(digest).decode()
        assert headers["X-Twilio-Webhooks-Signature-Settings"] == "algorithm=HMAC_SHA256"


def _values(value: str | list[str]) -> list[str]:
    return value if isinstance(value, list) else [value]


def test_twilio_sdk_verifies_json_bodies() -> None:
    headers, body = sign(
        Twilio(secret="tw-token", url=TWILIO_URL), EVENT, content_type="application/json"
    )
    url = f"{TWILIO_URL}?bodySHA256={hashlib.sha256(body).hexdigest()}"
    assert RequestValidator("tw-token").validate(url, body.decode(), headers["X-Twilio-Signature"])


def test_octokit_verifies_github(npm: Path) -> None:
    source = GitHub(secret="gh-secret")
    headers, body = sign(source, EVENT, event="issues")
    assert npm_verifies(npm, "github", "gh-secret", headers, body)["valid"]
    assert not npm_verifies(npm, "github", "other", headers, body)["valid"]
    assert headers["X-GitHub-Event"] == "issues"


def test_githubs_published_vector() -> None:
    headers, _ = sign(GitHub(secret="It's a Secret to Everybody"), b"Hello, World!")
    expected = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert headers["X-Hub-Signature-256"] == f"sha256={expected}"


def test_shopify_api_validates_signature_and_headers(npm: Path) -> None:
    headers, body = sign(Shopify(secret="shpss_1"), EVENT, topic="orders/paid")
    answer = npm_verifies(npm, "shopify", "shpss_1", headers, body)
    assert answer["valid"], answer["detail"]
    assert '"topic":"ORDERS_PAID"' in answer["detail"]
    assert not npm_verifies(npm, "shopify", "other", headers, body)["valid"]


def test_mollie_recipe() -> None:
    headers, body = sign(Mollie(secret="mollie-secret"), EVENT)
    digest = hmac.new(b"mollie-secret", body, hashlib.sha256).hexdigest()
    assert headers["X-Mollie-Signature"] == f"sha256={digest}"


def test_mollie_classic_is_an_unsigned_form() -> None:
    source = MollieClassic(fetch=lambda resource_id: None)
    assert sign(source, {"id": "tr_WDqYK6vllg"}) == (
        {"Content-Type": "application/x-www-form-urlencoded"},
        b"id=tr_WDqYK6vllg",
    )


def test_lemonsqueezy_recipe() -> None:
    payload = {"meta": {"event_name": "order_created"}, "data": {"type": "orders", "id": "1"}}
    headers, body = sign(LemonSqueezy(secret="lemon"), payload)
    assert headers["X-Signature"] == hmac.new(b"lemon", body, hashlib.sha256).hexdigest()
    assert headers["X-Event-Name"] == "order_created"


def test_gitlab_sends_the_token_and_keeps_the_key() -> None:
    source = GitLab(token="glpat-token")
    first, _ = sign(source, EVENT, event="Merge Request Hook")
    second, _ = sign(source, EVENT, event="Merge Request Hook")
    assert first["X-Gitlab-Token"] == "glpat-token"
    assert first["Idempotency-Key"] == second["Idempotency-Key"]
    assert first["X-Gitlab-Webhook-UUID"] != second["X-Gitlab-Webhook-UUID"]


def test_hmac_source_recipe() -> None:
    source = HMACSource(
        name="acme",
        secret="acme-secret",
        signature_header="X-Acme-Signature",
        signature_prefix="sha512=",
        algorithm="sha512",
        encoding="base64",
        timestamp_header="X-Acme-Timestamp",
        id_header="X-Acme-Delivery",
    )
    headers, body = sign(source, EVENT, at=1_700_000_000, event_id="d-1")
    digest = hmac.new(b"acme-secret", b"1700000000." + body, hashlib.sha512).digest()
    assert headers["x-acme-signature"] == "sha512=" + base64.b64encode(digest).decode()
    assert headers["x-acme-timestamp"] == "1700000000"
    assert headers["x-acme-delivery"] == "d-1"


def test_paypal_recipe() -> None:
    certificate = paypal_test_certificate()
    source = PayPal(webhook_id="1JE4291016473214C", certificate=certificate.pem)
    headers, body = sign(source, EVENT, at=1_700_000_000)
    assert headers["PAYPAL-TRANSMISSION-TIME"] == "2023-11-14T22:13:20Z"
    crc = binascii.crc32(body) & 0xFFFFFFFF
    text = f"{headers['PAYPAL-TRANSMISSION-ID']}|2023-11-14T22:13:20Z|1JE4291016473214C|{crc}"
    public = certificate.private_key.public_key()
    public.verify(
        base64.b64decode(headers["PAYPAL-TRANSMISSION-SIG"]),
        text.encode(),
        padding.PKCS1v15(),
        hashes.SHA256(),
    )
    other = PayPal(webhook_id="1JE4291016473214C", certificate=certificate.pem)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged, _ = sign(other, EVENT, at=1_700_000_000, private_key=stranger)
    with pytest.raises(BadSignature):
        source.verify(normalize_headers(forged), body, now=1_700_000_000)


def test_workos_sdk_verifies() -> None:
    sdk = workos.WorkOSClient(api_key="sk_test_signers", client_id="client_signers").webhooks
    headers, body = sign(WorkOS(secret="wsec_1"), EVENT)
    sdk.verify_header(event_body=body, event_signature=headers["WorkOS-Signature"], secret="wsec_1")
    with pytest.raises(ValueError, match=r"(?i)signature"):
        sdk.verify_header(
            event_body=body, event_signature=headers["WorkOS-Signature"], secret="wsec_2"
        )


def test_linear_sdk_verifies_and_the_timestamp_is_in_the_signed_body(npm: Path) -> None:
    issue = {"action": "create", "type": "Issue", "data": {"id": "1"}}
    headers, body = sign(Linear(secret="lin-secret"), issue, delivery="d-1")
    assert npm_verifies(npm, "linear", "lin-secret", headers, body)["valid"]
    assert not npm_verifies(npm, "linear", "other", headers, body)["valid"]
    assert abs(json.loads(body)["webhookTimestamp"] / 1000 - time.time()) < 30
    assert (headers["Linear-Delivery"], headers["Linear-Event"]) == ("d-1", "Issue")


def test_calendly_recipe() -> None:
    headers, body = sign(Calendly(secret="cal"), EVENT, at=1_700_000_000)
    digest = hmac.new(b"cal", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert headers["Calendly-Webhook-Signature"] == f"t=1700000000,v1={digest}"


def test_intercom_recipe() -> None:
    headers, body = sign(Intercom(secret="ic"), EVENT)
    assert headers["X-Hub-Signature"] == "sha1=" + hmac.new(b"ic", body, hashlib.sha1).hexdigest()


def test_typeform_recipe() -> None:
    headers, body = sign(Typeform(secret="tf"), EVENT)
    digest = base64.b64encode(hmac.new(b"tf", body, hashlib.sha256).digest()).decode()
    assert headers["Typeform-Signature"] == f"sha256={digest}"


def test_mailgun_recipe_signs_inside_the_body() -> None:
    _, body = sign(Mailgun(secret="mg"), {"event-data": {"id": "e1"}}, at=1_700_000_000)
    block = json.loads(body)["signature"]
    assert (block["timestamp"], len(block["token"])) == ("1700000000", 50)
    expected = hmac.new(b"mg", f"1700000000{block['token']}".encode(), hashlib.sha256)
    assert block["signature"] == expected.hexdigest()
    _, again = sign(Mailgun(secret="mg"), {"event-data": {"id": "e1"}}, at=1_700_000_000)
    assert json.loads(again)["signature"]["token"] != block["token"]  # new on every attempt


def test_postmark_sends_basic_credentials() -> None:
    headers, _ = sign(Postmark(username="hooks", password="pw:1"), EVENT)
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"hooks:pw:1").decode()


SOURCES: list[tuple[Source, Any]] = [
    (Stripe(secret="whsec_test"), EVENT),
    (Paddle(secret="pdl"), {"event_id": "evt_1", "event_type": "transaction.paid"}),
    (Shopify(secret="shpss_1"), EVENT),
    (GitHub(secret="gh"), EVENT),
    (StandardWebhooks(secret=STANDARD_SECRET), EVENT),
    (GitLabSigned(secret=STANDARD_SECRET), EVENT),
    (GitLab(token="glpat"), EVENT),
    (Slack(secret="slack"), {"event_id": "Ev1", "event": {"type": "message"}}),
    (Square(secret="sq", notification_url=SQUARE_URL), {"event_id": "e1", "type": "x"}),
    (LemonSqueezy(secret="lemon"), {"meta": {"event_name": "a"}, "data": {"type": "b", "id": "1"}}),
    (Mollie(secret="mollie"), EVENT),
    (Twilio(secret="tw", url=TWILIO_URL), {"MessageSid": "SM1", "MessageStatus": "sent"}),
    (HMACSource(name="h", secret="h", signature_header="X-Sig", id_header="X-Id"), EVENT),
    (PayPal(webhook_id="WH1", certificate=paypal_test_certificate().pem), EVENT),
    (WorkOS(secret="wk"), EVENT),
    (Calendly(secret="cal"), {"event": "invitee.created", "payload": {"uri": "https://x/i/1"}}),
    (Intercom(secret="ic"), EVENT),
    (Linear(secret="lin", tolerance=300), {"type": "Issue", "action": "create"}),
    (Postmark(username="pm", password="pw"), {"RecordType": "Bounce", "ID": 7}),
    (Mailgun(secret="mg"), {"event-data": {"id": "e1", "event": "delivered"}}),
    (Typeform(secret="tf"), {"event_id": "01H", "event_type": "form_response"}),
]


@pytest.mark.parametrize(("source", "payload"), SOURCES, ids=lambda s: type(s).__name__)
def test_hookinboxs_own_sources_accept_and_key_by_body(source: Source, payload: Any) -> None:
    now = time.time()
    headers, body = sign(source, payload, at=now)
    again, again_body = sign(source, payload, at=now + 60)  # a retry, a minute later
    other, other_body = sign(
        source,
        {**payload, "extra": 1}
        if "MessageSid" not in payload
        else {**payload, "MessageStatus": "delivered"},
        at=now,
    )
    keys = []
    for h, b in ((headers, body), (again, again_body), (other, other_body)):
        normalized = normalize_headers(h)
        source.verify(normalized, b, now=now + 60)
        keys.append(source.identify(normalized, b).event_id)
    assert keys[0] == keys[1], "the same body signed twice is one event"
    # Sources keyed by a header get a new id for a new body; the others read it from the body.
    body_keyed = (Stripe, Paddle, Slack, Square, Mollie, PayPal, HMACSource, LemonSqueezy)
    body_keyed += (WorkOS, Calendly, Intercom, Postmark, Mailgun, Typeform)
    if not isinstance(source, body_keyed):
        assert keys[2] != keys[0], "another body is another event"
    # Mailgun signs inside the body: the forgery is in the body the signer returns.
    forged, forged_body = sign(source, payload, at=now, **_wrong_secret(source))
    with pytest.raises(BadSignature):
        source.verify(normalize_headers(forged), forged_body, now=now)


def _wrong_secret(source: Source) -> dict[str, Any]:
    if isinstance(source, PayPal):
        return {"private_key": rsa.generate_private_key(public_exponent=65537, key_size=2048)}
    if isinstance(source, StandardWebhooks):
        return {"secret": "whsec_" + base64.b64encode(b"not the key").decode()}
    return {"secret": "not-the-secret"}


def test_a_field_the_provider_has_not_is_refused() -> None:
    with pytest.raises(TypeError, match="topic"):
        sign(Stripe(secret="whsec_test"), EVENT, topic="orders/create")


def test_the_body_is_sent_as_given() -> None:
    raw = json.dumps(EVENT, indent=2).encode()
    assert sign(Stripe(secret="whsec_test"), raw)[1] == raw


def test_every_source_class_has_a_signer() -> None:
    """A source added to hookinbox.sources without a signer here fails this test."""
    import hookinbox.sources
    from hookinbox.testing._signing import signer_for

    classes = [getattr(hookinbox.sources, name) for name in hookinbox.sources.__all__]
    sources = [c for c in classes if isinstance(c, type) and issubclass(c, Source)]
    concrete = [c for c in sources if c is not Source]
    assert len(concrete) == 27
    for cls in concrete:
        instance = cls.__new__(cls)  # the signer is chosen by class; nothing is configured
        assert signer_for(instance) is not None, cls.__name__


def test_gitlab_signed_sends_its_idempotency_key_as_the_webhook_id() -> None:
    headers, _ = sign(GitLabSigned(secret=STANDARD_SECRET), EVENT)
    assert headers["Idempotency-Key"] == headers["webhook-id"]
