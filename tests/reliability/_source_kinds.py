"""Every signed source class, described once: how to build it, how its sender signs.

For tests/reliability/test_signature_edges.py, which runs the same edge cases over all of them.
Each `Kind` signs the way the provider's documentation says (one signature entry per secret,
assembled into the provider's headers), so an entry can be corrupted, repeated or re-labelled
on its own. The sources' own test modules hold the provider-library cross-checks; here the
point is breadth: the same hostile input against every class.

The providers declared as HMAC presets are not written out here: their kinds are derived from
the declarations (`_preset_kind`), signed from the preset's facts by
tests/support/hmac_presets.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from hookinbox._errors import VerificationError
from hookinbox._headers import normalize_headers
from hookinbox.sources import (
    Asana,
    AzureEventGrid,
    AzureEventGridCloudEvents,
    Box,
    Calendly,
    Chargebee,
    Clerk,
    Discord,
    DocuSign,
    GitHub,
    GitLab,
    GitLabSigned,
    HMACSource,
    HubSpot,
    Linear,
    Meta,
    Mollie,
    Mux,
    Netlify,
    Okta,
    OpenAI,
    Paddle,
    PagerDuty,
    PayPal,
    Postmark,
    Replicate,
    Resend,
    SendGrid,
    Shopify,
    Source,
    Square,
    StandardWebhooks,
    Stripe,
    Telegram,
    Telnyx,
    Trello,
    Twilio,
    Twitch,
    WooCommerce,
    WorkOS,
    Zendesk,
    Zoom,
)
from hookinbox.sources._provider import Provider
from tests.support import hmac_presets as presets
from tests.support import paypal
from tests.support.pki import paypal_signing

NOW = 1_700_000_000  # paypal.TRANSMISSION_TIME
SQUARE_URL = "https://shop.example/webhooks/square"
TWILIO_URL = "https://shop.example/webhooks/twilio"
TRELLO_URL = "https://shop.example/webhooks/trello"
MESSAGE_ID = "msg_2Lh9edge"
TRANSMISSION_ID = "8ea3c1c0-82a5-11ee-b962-0242ac120002"

Headers = dict[str, str]


def hex_mac(secret: str, message: bytes, algorithm: str = "sha256") -> str:
    return hmac.new(secret.encode(), message, algorithm).hexdigest()


def b64_mac(key: bytes, message: bytes, algorithm: str = "sha256") -> str:
    return base64.b64encode(hmac.new(key, message, algorithm).digest()).decode()


def standard_key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix("whsec_"))


def iso(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def json_body(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


@dataclass(frozen=True)
class Kind:
    """One source class: its configuration and its sender's signing."""

    cls: type[Source]
    build: Callable[..., Source]
    """`build(secret_or_secrets, **options)`; options such as `tolerance`."""
    secrets: tuple[str, str, str]
    """An old and a new secret (a rotation), and a stranger's."""
    body: bytes
    sign: Callable[[str, bytes, int], str]
    """One signature entry for (secret, body, timestamp), scheme label included."""
    assemble: Callable[[Sequence[str], int], Headers]
    """The delivery's headers carrying these entries (and the timestamp)."""
    several: bool = False
    """The format carries several signatures (one per secret during a rotation)."""
    scheme: str = ""
    """The label that names the signature scheme at the start of an entry."""
    wrong_schemes: tuple[str, ...] = ()
    scheme_header: str = ""
    """Where the scheme is named in a header of its own instead (PayPal's algorithm)."""
    timestamped: bool = False
    costly: bool = False
    """Each signature costs a check of its own (a public key's): at most
    `MAX_EXPENSIVE_CANDIDATES` distinct ones per delivery (issue 31)."""

    @property
    def name(self) -> str:
        return self.cls.__name__

    def headers(self, secrets: Sequence[str], *, at: int = NOW) -> Headers:
        return self.assemble([self.sign(s, self.body, at) for s in secrets], at)

    def wrong_scheme_deliveries(self, secret: str, *, at: int = NOW) -> list[Headers]:
        """The right digest under every wrong scheme label: each must be refused."""
        entry = self.sign(secret, self.body, at)
        if self.scheme_header:
            right = self.assemble([entry], at)
            return [{**right, self.scheme_header: wrong} for wrong in self.wrong_schemes]
        digest = entry.removeprefix(self.scheme)
        return [self.assemble([wrong + digest], at) for wrong in self.wrong_schemes]


def status(source: Source, headers: Headers, body: bytes, *, now: int = NOW) -> int:
    """What the receiver answers for the verification step: 401 if refused, else 200."""
    try:
        source.authenticate(normalize_headers(headers), body, now=now)
    except VerificationError:
        return 401
    return 200


def _paypal_sign(webhook_id: str, body: bytes, at: int) -> str:
    key = paypal_signing().key
    assert isinstance(key, rsa.RSAPrivateKey)
    crc = zlib.crc32(body) & 0xFFFFFFFF
    text = f"{TRANSMISSION_ID}|{iso(at)}|{webhook_id}|{crc}".encode()
    return base64.b64encode(key.sign(text, padding.PKCS1v15(), hashes.SHA256())).decode()


def _paypal_headers(entries: Sequence[str], at: int) -> Headers:
    return {
        "PAYPAL-TRANSMISSION-ID": TRANSMISSION_ID,
        "PAYPAL-TRANSMISSION-TIME": iso(at),
        "PAYPAL-TRANSMISSION-SIG": ", ".join(entries),
        "PAYPAL-CERT-URL": paypal.CERT_URL,
        "PAYPAL-AUTH-ALGO": "SHA256withRSA",
    }


def _standard_headers(entries: Sequence[str], at: int) -> Headers:
    return {
        "webhook-id": MESSAGE_ID,
        "webhook-timestamp": str(at),
        "webhook-signature": " ".join(entries),
    }


def _twilio_form(secret: str, body: bytes, _at: int) -> str:
    fields = sorted(parse_qsl(body.decode()))  # Twilio signs names and values, sorted
    signed = TWILIO_URL + "".join(name + value for name, value in fields)
    return b64_mac(secret.encode(), signed.encode(), "sha1")


HEX_SCHEMES = ("sha1=", "sha512=", "SHA256=")

# Discord's "secrets" are public keys: each signs with its private half.
_ED25519 = [Ed25519PrivateKey.from_private_bytes(bytes([n]) * 32) for n in (1, 2, 3)]
_BY_PUBLIC = {
    k.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex(): k for k in _ED25519
}
DISCORD_KEYS = tuple(_BY_PUBLIC)


# SendGrid's "secrets" are public keys too (P-256, base64 DER): each signs with its private half.
_P256 = [ec.derive_private_key(n, ec.SECP256R1()) for n in (11, 12, 13)]
_P256_BY_PUBLIC = {
    base64.b64encode(
        k.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    ).decode(): k
    for k in _P256
}
SENDGRID_KEYS = tuple(_P256_BY_PUBLIC)
# Telnyx's too (Ed25519, base64 as the portal shows it).
_TELNYX = {
    base64.b64encode(k.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode(): k
    for k in (Ed25519PrivateKey.from_private_bytes(bytes([n]) * 32) for n in (4, 5, 6))
}
TELNYX_KEYS = tuple(_TELNYX)
HUBSPOT_URL = "https://shop.example/webhooks/hubspot"


def _sendgrid_sign(public_key: str, body: bytes, at: int) -> str:
    signature = _P256_BY_PUBLIC[public_key].sign(str(at).encode() + body, ec.ECDSA(hashes.SHA256()))
    return base64.b64encode(signature).decode()


def _netlify_token(secret: str, body: bytes, _at: int) -> str:
    """Netlify's JWS: HS256 under the secret token, claims `iss` and the body's SHA-256."""
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    claims = json.dumps({"iss": "netlify", "sha256": hashlib.sha256(body).hexdigest()})
    payload = base64.urlsafe_b64encode(claims.encode()).rstrip(b"=").decode()
    mac = hmac.new(secret.encode(), f"{head}.{payload}".encode(), "sha256").digest()
    return f"{head}.{payload}." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def _svix_headers(entries: Sequence[str], at: int) -> Headers:
    return {"svix-id": MESSAGE_ID, "svix-timestamp": str(at), "svix-signature": " ".join(entries)}


def _twitch_time(at: int) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.123456789Z")


def whsec(label: str) -> str:
    return "whsec_" + base64.b64encode(label.encode()).decode()


def box_time(at: int) -> str:
    """`BOX-DELIVERY-TIMESTAMP`: RFC 3339 with an offset."""
    return datetime.fromtimestamp(at, UTC).isoformat()


def _box_headers(entries: Sequence[str], at: int) -> Headers:
    return {
        "BOX-SIGNATURE-PRIMARY": ", ".join(entries),
        "BOX-DELIVERY-TIMESTAMP": box_time(at),
        "BOX-SIGNATURE-VERSION": "1",
        "BOX-SIGNATURE-ALGORITHM": "HmacSHA256",
    }


STANDARD_SECRETS = (whsec("old standard secret"), whsec("new standard"), whsec("stranger's"))

KINDS: tuple[Kind, ...] = (
    Kind(
        Stripe,
        lambda s, **o: Stripe(secret=s, **o),
        ("whsec_old_edge", "whsec_new_edge", "whsec_stranger"),
        json_body(id="evt_edge", type="invoice.paid", created=NOW),
        sign=lambda s, b, t: "v1=" + hex_mac(s, f"{t}.".encode() + b),
        assemble=lambda e, t: {"Stripe-Signature": ",".join([f"t={t}", *e])},
        several=True, scheme="v1=", wrong_schemes=("v0=", "v2=", "V1="), timestamped=True,
    ),
    Kind(
        Paddle,
        lambda s, **o: Paddle(secret=s, **o),
        ("pdl_old_edge", "pdl_new_edge", "pdl_stranger"),
        json_body(event_id="evt_edge", event_type="transaction.paid", occurred_at=iso(NOW)),
        sign=lambda s, b, t: "h1=" + hex_mac(s, f"{t}:".encode() + b),
        assemble=lambda e, t: {"Paddle-Signature": ";".join([f"ts={t}", *e])},
        several=True, scheme="h1=", wrong_schemes=("h0=", "h2=", "H1="), timestamped=True,
    ),
    Kind(
        StandardWebhooks,
        lambda s, **o: StandardWebhooks(secret=s, **o),
        STANDARD_SECRETS,
        json_body(type="invoice.paid", data={}),
        sign=lambda s, b, t: "v1," + b64_mac(standard_key(s), f"{MESSAGE_ID}.{t}.".encode() + b),
        assemble=_standard_headers,
        several=True, scheme="v1,", wrong_schemes=("v1a,", "v2,", "V1,"), timestamped=True,
    ),
    Kind(
        GitLabSigned,
        lambda s, **o: GitLabSigned(secret=s, **o),
        STANDARD_SECRETS,
        json_body(object_kind="push"),
        sign=lambda s, b, t: "v1," + b64_mac(standard_key(s), f"{MESSAGE_ID}.{t}.".encode() + b),
        assemble=lambda e, t: {**_standard_headers(e, t), "X-Gitlab-Event": "Push Hook"},
        several=True, scheme="v1,", wrong_schemes=("v1a,", "v2,", "V1,"), timestamped=True,
    ),
    Kind(
        HMACSource,
        lambda s, **o: HMACSource(
            name="acme", secret=s, signature_header="X-Acme-Signature",
            signature_prefix="sha256=", timestamp_header="X-Acme-Timestamp", **o,
        ),
        ("acme_old_edge", "acme_new_edge", "acme_stranger"),
        json_body(id="acme_edge", type="thing.done"),
        sign=lambda s, b, t: "sha256=" + hex_mac(s, f"{t}.".encode() + b),
        assemble=lambda e, t: {"X-Acme-Signature": ", ".join(e), "X-Acme-Timestamp": str(t)},
        scheme="sha256=", wrong_schemes=HEX_SCHEMES, timestamped=True,
    ),
    Kind(
        PayPal,
        lambda s, **o: PayPal(webhook_id=s, certificate=paypal_signing().pem, **o),
        ("1JE4291016473214C", "9XL90610J3647323C", "5GP028458E2496506"),  # webhook ids
        json.dumps(paypal.capture_completed()).encode(),
        sign=_paypal_sign,
        assemble=_paypal_headers,
        scheme_header="PAYPAL-AUTH-ALGO",
        wrong_schemes=("SHA1withRSA", "SHA512withRSA", "sha256withrsa"),
        timestamped=True,
    ),
    Kind(
        GitHub,
        lambda s, **o: GitHub(secret=s, **o),
        ("gh_old_edge", "gh_new_edge", "gh_stranger"),
        json_body(action="opened"),
        sign=lambda s, b, _t: "sha256=" + hex_mac(s, b),
        assemble=lambda e, _t: {
            "X-Hub-Signature-256": ", ".join(e), "X-GitHub-Delivery": "d-edge",
            "X-GitHub-Event": "pull_request",
        },
        scheme="sha256=", wrong_schemes=HEX_SCHEMES,
    ),
    Kind(
        Mollie,
        lambda s, **o: Mollie(secret=s, **o),
        ("mollie_old_edge", "mollie_new_edge", "mollie_stranger"),
        json_body(id="event_edge", type="payment-link.paid", createdAt=iso(NOW)),
        sign=lambda s, b, _t: "sha256=" + hex_mac(s, b),
        assemble=lambda e, _t: {"X-Mollie-Signature": ", ".join(e)},
        scheme="sha256=", wrong_schemes=HEX_SCHEMES,
    ),
    Kind(
        Shopify,
        lambda s, **o: Shopify(secret=s, **o),
        ("shpss_old_edge", "shpss_new_edge", "shpss_stranger"),
        json_body(id=1),
        sign=lambda s, b, _t: b64_mac(s.encode(), b),
        assemble=lambda e, _t: {
            "X-Shopify-Hmac-Sha256": ", ".join(e), "X-Shopify-Event-Id": "e-edge",
            "X-Shopify-Topic": "orders/create",
        },
    ),
    Kind(
        Square,
        lambda s, **o: Square(secret=s, notification_url=SQUARE_URL, **o),
        ("sq_old_edge", "sq_new_edge", "sq_stranger"),
        json_body(event_id="sq-edge", type="payment.updated", created_at=iso(NOW)),
        sign=lambda s, b, _t: b64_mac(s.encode(), SQUARE_URL.encode() + b),
        assemble=lambda e, _t: {"x-square-hmacsha256-signature": ", ".join(e)},
    ),
    Kind(
        Twilio,
        lambda s, **o: Twilio(secret=s, url=TWILIO_URL, **o),
        ("tw_old_edge_token", "tw_new_edge_token", "tw_stranger_token"),
        urlencode({"MessageSid": "SMedge", "MessageStatus": "delivered"}).encode(),
        sign=_twilio_form,
        assemble=lambda e, _t: {
            "X-Twilio-Signature": ", ".join(e),
            "Content-Type": "application/x-www-form-urlencoded",
        },
    ),
    Kind(
        Resend,
        lambda s, **o: Resend(secret=s, **o),
        STANDARD_SECRETS,
        json_body(type="email.sent", created_at=iso(NOW), data={}),
        sign=lambda s, b, t: "v1," + b64_mac(standard_key(s), f"{MESSAGE_ID}.{t}.".encode() + b),
        assemble=_svix_headers,
        several=True, scheme="v1,", wrong_schemes=("v1a,", "v2,", "V1,"), timestamped=True,
    ),
    Kind(
        Clerk,
        lambda s, **o: Clerk(secret=s, **o),
        STANDARD_SECRETS,
        json_body(type="user.created", timestamp=NOW * 1000, data={}),
        sign=lambda s, b, t: "v1," + b64_mac(standard_key(s), f"{MESSAGE_ID}.{t}.".encode() + b),
        assemble=_svix_headers,
        several=True, scheme="v1,", wrong_schemes=("v1a,", "v2,", "V1,"), timestamped=True,
    ),
    Kind(
        Zoom,
        lambda s, **o: Zoom(secret=s, **o),
        ("zoom_old_edge", "zoom_new_edge", "zoom_stranger"),
        json_body(event="meeting.started", event_ts=NOW * 1000, payload={}),
        sign=lambda s, b, t: "v0=" + hex_mac(s, f"v0:{t}:".encode() + b),
        assemble=lambda e, t: {"x-zm-signature": ", ".join(e), "x-zm-request-timestamp": str(t)},
        scheme="v0=", wrong_schemes=("v1=", "V0=", "v00="), timestamped=True,
    ),
    Kind(
        Twitch,
        lambda s, **o: Twitch(secret=s, **o),
        ("twitch_old_edge", "twitch_new_edge", "twitch_stranger"),
        json_body(subscription={"type": "channel.follow", "version": "2"}, event={}),
        sign=lambda s, b, t: "sha256=" + hex_mac(s, f"tw-edge{_twitch_time(t)}".encode() + b),
        assemble=lambda e, t: {
            "Twitch-Eventsub-Message-Signature": ", ".join(e),
            "Twitch-Eventsub-Message-Id": "tw-edge",
            "Twitch-Eventsub-Message-Timestamp": _twitch_time(t),
            "Twitch-Eventsub-Message-Type": "notification",
        },
        scheme="sha256=", wrong_schemes=HEX_SCHEMES, timestamped=True,
    ),
    Kind(
        SendGrid,
        lambda s, **o: SendGrid(public_key=s, **o),
        SENDGRID_KEYS,
        json.dumps([{"sg_event_id": "sg-edge", "event": "open"}]).encode(),
        sign=_sendgrid_sign,
        assemble=lambda e, t: {
            "X-Twilio-Email-Event-Webhook-Signature": ", ".join(e),
            "X-Twilio-Email-Event-Webhook-Timestamp": str(t),
        },
        timestamped=True,
        costly=True,
    ),
    Kind(
        HubSpot,
        lambda s, **o: HubSpot(secret=s, url=HUBSPOT_URL, **o),
        ("hs_old_edge", "hs_new_edge", "hs_stranger"),
        json.dumps([{"eventId": 1, "subscriptionId": 2}]).encode(),
        sign=lambda s, b, t: b64_mac(s.encode(), f"POST{HUBSPOT_URL}".encode() + b + b"%d000" % t),
        assemble=lambda e, t: {
            "X-HubSpot-Signature-v3": ", ".join(e), "X-HubSpot-Request-Timestamp": str(t * 1000)
        },
        timestamped=True,
    ),
    Kind(
        Discord,
        lambda s, **o: Discord(public_key=s, **o),
        DISCORD_KEYS,
        json_body(type=2, id="1179000000000000001", data={"name": "edge"}),
        sign=lambda s, b, t: _BY_PUBLIC[s].sign(str(t).encode() + b).hex(),
        assemble=lambda e, t: {
            "X-Signature-Ed25519": ", ".join(e), "X-Signature-Timestamp": str(t)
        },
        timestamped=True,
        costly=True,
    ),
    Kind(
        GitLab,
        lambda s, **o: GitLab(token=s, **o),
        ("gl_old_edge_token", "gl_new_edge_token", "gl_stranger_token"),
        json_body(object_kind="push"),
        sign=lambda s, _b, _t: s,  # the token itself: a shared password, not a signature
        assemble=lambda e, _t: {
            "X-Gitlab-Token": ", ".join(e), "Idempotency-Key": "k-edge",
            "X-Gitlab-Event": "Push Hook",
        },
    ),
    # issue 23, round two (Mailgun signs in its body: see test_signature_edges.SIGNED_IN_BODY)
    Kind(
        WorkOS,
        lambda s, **o: WorkOS(secret=s, **o),
        ("wk_old_edge", "wk_new_edge", "wk_stranger"),
        json_body(id="event_edge", event="user.created", created_at=iso(NOW)),
        sign=lambda s, b, t: "v1=" + hex_mac(s, f"{t * 1000}.".encode() + b),
        assemble=lambda e, t: {"WorkOS-Signature": ", ".join([f"t={t * 1000}", *e])},
        several=True, scheme="v1=", wrong_schemes=("v0=", "v2=", "V1="), timestamped=True,
    ),
    Kind(
        Calendly,
        lambda s, **o: Calendly(secret=s, **o),
        ("cal_old_edge", "cal_new_edge", "cal_stranger"),
        json_body(event="invitee.created", payload={"uri": "https://calendly.test/i/edge"}),
        sign=lambda s, b, t: "v1=" + hex_mac(s, f"{t}.".encode() + b),
        assemble=lambda e, t: {"Calendly-Webhook-Signature": ",".join([f"t={t}", *e])},
        several=True, scheme="v1=", wrong_schemes=("v0=", "v2=", "V1="), timestamped=True,
    ),
    Kind(
        Linear,  # the time is in the signed body (stamped at NOW): its window is tested there
        lambda s, **o: Linear(secret=s, **o),
        ("lin_old_edge", "lin_new_edge", "lin_stranger"),
        json_body(type="Issue", action="create", webhookTimestamp=NOW * 1000),
        sign=lambda s, b, _t: hex_mac(s, b),
        assemble=lambda e, _t: {"Linear-Signature": ", ".join(e), "Linear-Delivery": "d-edge"},
    ),
    # issue 47, round three: plain HMAC and Standard Webhooks presets
    Kind(
        OpenAI,
        lambda s, **o: OpenAI(secret=s, **o),
        STANDARD_SECRETS,
        json_body(object="event", type="response.completed", created_at=NOW, data={}),
        sign=lambda s, b, t: "v1," + b64_mac(standard_key(s), f"{MESSAGE_ID}.{t}.".encode() + b),
        assemble=_standard_headers,
        several=True, scheme="v1,", wrong_schemes=("v1a,", "v2,", "V1,"), timestamped=True,
    ),
    Kind(
        Replicate,
        lambda s, **o: Replicate(secret=s, **o),
        STANDARD_SECRETS,
        json_body(id="pred_edge", status="succeeded", created_at=iso(NOW)),
        sign=lambda s, b, t: "v1," + b64_mac(standard_key(s), f"{MESSAGE_ID}.{t}.".encode() + b),
        assemble=_standard_headers,
        several=True, scheme="v1,", wrong_schemes=("v1a,", "v2,", "V1,"), timestamped=True,
    ),
    # issue 47, round three: handshakes (their GET answers: tests/http/test_handshakes.py)
    Kind(
        Meta,
        lambda s, **o: Meta(secret=s, verify_token="vt-edge", **o),
        ("meta_old_edge", "meta_new_edge", "meta_stranger"),
        json_body(object="whatsapp_business_account", entry=[{"id": "1", "changes": [
            {"field": "messages", "value": {"messages": [{"id": "wamid.edge"}]}}]}]),
        sign=lambda s, b, _t: "sha256=" + hex_mac(s, b),
        assemble=lambda e, _t: {"X-Hub-Signature-256": ", ".join(e)},
        scheme="sha256=", wrong_schemes=HEX_SCHEMES,
    ),
    Kind(
        Okta,
        lambda s, **o: Okta(secret=s, **o),
        ("okta_old_edge_value", "okta_new_edge_value", "okta_stranger_value"),
        json_body(data={"events": [{"uuid": "u-edge", "eventType": "user.session.start"}]}),
        sign=lambda s, _b, _t: s,  # the header's value itself: a shared password
        assemble=lambda e, _t: {"Authorization": ", ".join(e)},
    ),
    Kind(
        Trello,
        lambda s, **o: Trello(secret=s, url=TRELLO_URL, **o),
        ("trello_old_edge", "trello_new_edge", "trello_stranger"),
        json_body(action={"id": "act-edge", "type": "updateCard"}),
        sign=lambda s, b, _t: b64_mac(s.encode(), b + TRELLO_URL.encode(), "sha1"),
        assemble=lambda e, _t: {"X-Trello-Webhook": ", ".join(e)},
    ),
    Kind(
        Telnyx,
        lambda s, **o: Telnyx(public_key=s, **o),
        TELNYX_KEYS,
        json_body(data={"id": "tx-edge", "event_type": "message.sent"}, meta={"attempt": 1}),
        sign=lambda s, b, t: base64.b64encode(_TELNYX[s].sign(f"{t}|".encode() + b)).decode(),
        assemble=lambda e, t: {
            "telnyx-signature-ed25519": ", ".join(e), "telnyx-timestamp": str(t)
        },
        timestamped=True,
        costly=True,
    ),
    Kind(
        Netlify,
        lambda s, **o: Netlify(secret=s, **o),
        ("netlify-old-jws-secret-edge-32-bytes", "netlify-new-jws-secret-edge-32-bytes",
         "netlify-stranger-jws-secret-32-bytes"),
        json_body(id="deploy-edge", state="ready"),
        sign=_netlify_token,
        assemble=lambda e, _t: {"X-Webhook-Signature": ", ".join(e)},
        costly=True,  # each token is decoded and checked on its own
    ),
    Kind(
        Postmark,
        lambda s, **o: Postmark(username="postmark", password=s, **o),
        ("pm_old_edge", "pm_new_edge", "pm_stranger"),
        json_body(RecordType="Bounce", ID=1, MessageID="m-edge"),
        sign=lambda s, _b, _t: "Basic " + base64.b64encode(f"postmark:{s}".encode()).decode(),
        assemble=lambda e, _t: {"Authorization": ", ".join(e)},
        scheme="Basic ", wrong_schemes=("Bearer ", "Basic: ", "Digest "),
    ),
    # issue 47, round three: several signatures per delivery (a rotation)
    Kind(
        PagerDuty,
        lambda s, **o: PagerDuty(secret=s, **o),
        ("pd_old_edge", "pd_new_edge", "pd_stranger"),
        json_body(event={"id": "pd-edge", "event_type": "incident.triggered"}),
        sign=lambda s, b, _t: "v1=" + hex_mac(s, b),
        assemble=lambda e, _t: {"X-PagerDuty-Signature": ",".join(e)},
        several=True, scheme="v1=", wrong_schemes=("v0=", "v2=", "V1="),
    ),
    Kind(
        Box,
        lambda s, **o: Box(secret=s, **o),
        ("box_old_edge", "box_new_edge", "box_stranger"),
        json_body(type="webhook_event", id="box-edge", trigger="FILE.UPLOADED"),
        sign=lambda s, b, t: b64_mac(s.encode(), b + box_time(t).encode()),
        assemble=_box_headers,
        scheme_header="BOX-SIGNATURE-ALGORITHM",
        wrong_schemes=("HmacSHA1", "hmacsha256", "HmacSHA512"),
        timestamped=True,
    ),
    Kind(
        DocuSign,
        lambda s, **o: DocuSign(secret=s, **o),
        ("ds_old_edge", "ds_new_edge", "ds_stranger"),
        json_body(event="envelope-sent", generatedDateTime=iso(NOW), data={"envelopeId": "e"}),
        sign=lambda s, b, _t: b64_mac(s.encode(), b),
        assemble=lambda e, _t: {f"X-DocuSign-Signature-{n}": v for n, v in enumerate(e, 1)},
        several=True,
    ),
    # issue 47, round three: plain HMAC presets
    Kind(
        Asana,
        lambda s, **o: Asana(secret=s, **o),
        ("asana_old_edge_secret", "asana_new_edge_secret", "asana_stranger_secret"),
        json_body(events=[{"action": "changed", "resource": {"gid": "1"}}]),
        sign=lambda s, b, _t: hex_mac(s, b),
        assemble=lambda e, _t: {"X-Hook-Signature": ", ".join(e)},
    ),
    Kind(
        WooCommerce,
        lambda s, **o: WooCommerce(secret=s, **o),
        ("wc_old_edge", "wc_new_edge", "wc_stranger"),
        json_body(id=4750, date_modified_gmt="2023-11-14T22:13:20"),
        sign=lambda s, b, _t: b64_mac(s.encode(), b),
        assemble=lambda e, _t: {
            "X-WC-Webhook-Signature": ", ".join(e), "X-WC-Webhook-Topic": "order.updated"
        },
    ),
    Kind(
        Zendesk,
        lambda s, **o: Zendesk(secret=s, **o),
        ("zd_old_edge", "zd_new_edge", "zd_stranger"),
        json_body(id="zd-edge", type="zen:event-type:ticket.created"),
        sign=lambda s, b, t: b64_mac(s.encode(), iso(t).encode() + b),
        assemble=lambda e, t: {
            "X-Zendesk-Webhook-Signature": ", ".join(e),
            "X-Zendesk-Webhook-Signature-Timestamp": iso(t),
        },
        timestamped=True,
    ),
    # issue 47, round three: plain HMAC presets, round two
    Kind(
        Telegram,
        lambda s, **o: Telegram(secret_token=s, **o),
        ("tg_old_edge", "tg_new_edge", "tg_stranger"),
        json_body(update_id=902114537, message={"date": NOW, "text": "edge"}),
        sign=lambda s, _b, _t: s,  # the token itself: a shared password, not a signature
        assemble=lambda e, _t: {"X-Telegram-Bot-Api-Secret-Token": ", ".join(e)},
    ),
    Kind(
        Chargebee,
        lambda s, **o: Chargebee(username="chargebee", password=s, **o),
        ("cb_old_edge", "cb_new_edge", "cb_stranger"),
        json_body(id="ev_edge", event_type="subscription_created", occurred_at=NOW),
        sign=lambda s, _b, _t: "Basic " + base64.b64encode(f"chargebee:{s}".encode()).decode(),
        assemble=lambda e, _t: {"Authorization": ", ".join(e)},
        scheme="Basic ", wrong_schemes=("Bearer ", "Basic: ", "Digest "),
    ),
    Kind(
        Mux,
        lambda s, **o: Mux(secret=s, **o),
        ("mux_old_edge", "mux_new_edge", "mux_stranger"),
        json_body(id="mux-edge", type="video.asset.ready", created_at=iso(NOW)),
        sign=lambda s, b, t: "v1=" + hex_mac(s, f"{t}.".encode() + b),
        assemble=lambda e, t: {"Mux-Signature": ",".join([f"t={t}", *e])},
        several=True, scheme="v1=", wrong_schemes=("v0=", "v2=", "V1="), timestamped=True,
    ),
    Kind(
        AzureEventGrid,
        lambda s, **o: AzureEventGrid(secret=s, header="Authorization", **o),
        ("eg_old_edge_value", "eg_new_edge_value", "eg_stranger_value"),
        json.dumps([{"id": "eg-edge", "eventType": "Microsoft.Storage.BlobCreated"}]).encode(),
        sign=lambda s, _b, _t: s,  # the header's value itself: a shared key
        assemble=lambda e, _t: {"Authorization": ", ".join(e)},
    ),
    Kind(
        AzureEventGridCloudEvents,
        lambda s, **o: AzureEventGridCloudEvents(secret=s, header="Authorization", **o),
        ("egce_old_edge_value", "egce_new_edge_value", "egce_stranger_value"),
        json.dumps({"id": "egce-edge", "source": "/topics/shop", "type": "shop.paid"}).encode(),
        sign=lambda s, _b, _t: s,  # the header's value itself: a shared key
        assemble=lambda e, _t: {"Authorization": ", ".join(e)},
    ),
)  # fmt: skip


def _preset_kind(declared: Provider) -> Kind:
    """A provider declared as an HMAC preset, signed from its declared facts
    (tests/support/hmac_presets.py): a new preset provider needs no entry here."""
    cls = declared.source
    preset = presets.preset_of(cls)
    body = json.dumps(declared.event("edge")).encode()
    name = cls.default_name
    return Kind(
        cls,
        lambda s, **o: cls(secret=s, **o),
        (f"{name}_old_edge", f"{name}_new_edge", f"{name}_stranger"),
        body,
        sign=lambda s, b, t: presets.entry(preset, s, b, t),
        assemble=lambda e, t: presets.delivery(cls(secret="only-assembling"), e, body, t),
        scheme=preset.prefix,
        wrong_schemes=presets.wrong_schemes(preset),
        timestamped=preset.timestamp_header is not None,
    )


# Those written out above (Meta, built with its verify token) keep their entry.
_WRITTEN = {kind.cls for kind in KINDS}
KINDS = KINDS + tuple(
    _preset_kind(declared)
    for declared in presets.preset_providers()
    if declared.source not in _WRITTEN
)
