"""Every source class in one inbox, for the header tests (tests/http/test_header_values.py).

Built the same way in the test process and in the Flask and Django servers it starts, so a
delivery signed in one is verified in the other. PayPal's test certificate is made in the
test process and handed to the servers as a PEM file: `sign` needs its private key.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hookinbox import Inbox
from hookinbox.sources import (
    Calendly,
    Clerk,
    Discord,
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
    Resend,
    Shopify,
    Slack,
    Source,
    Square,
    StandardWebhooks,
    Stripe,
    Twilio,
    Twitch,
    Typeform,
    WorkOS,
    Zoom,
)
from hookinbox.testing import ed25519_test_key

STANDARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # the Standard Webhooks spec's example
GITLAB_TOKEN = "jéton-ünïcode ☕"  # typed with accents: GitLab sends its UTF-8 bytes

SIGNATURE_HEADER = {
    "stripe": "Stripe-Signature",
    "paddle": "Paddle-Signature",
    "shopify": "X-Shopify-Hmac-Sha256",
    "github": "X-Hub-Signature-256",
    "standard": "webhook-signature",
    "gitlab-signed": "webhook-signature",
    "gitlab": "X-Gitlab-Token",
    "slack": "X-Slack-Signature",
    "square": "x-square-hmacsha256-signature",
    "lemonsqueezy": "X-Signature",
    "mollie": "X-Mollie-Signature",
    "mollie-hmac": "X-Mollie-Signature",
    "twilio": "X-Twilio-Signature",
    "paypal": "PAYPAL-TRANSMISSION-SIG",
    "resend": "svix-signature",
    "clerk": "svix-signature",
    "discord": "X-Signature-Ed25519",
    "zoom": "x-zm-signature",
    "twitch": "Twitch-Eventsub-Message-Signature",
    # issue 23, round two
    "workos": "WorkOS-Signature",
    "calendly": "Calendly-Webhook-Signature",
    "intercom": "X-Hub-Signature",
    "linear": "Linear-Signature",
    "postmark": "Authorization",
    "typeform": "Typeform-Signature",
}
"""The header each signed source's signature travels in (Mollie classic has none; Mailgun's
signature is in its body)."""


def fetch_payment(resource_id: str) -> Mapping[str, Any]:
    """Mollie classic's fetch: every payment asked about is paid."""
    return {"id": resource_id, "resource": "payment", "status": "paid"}


def build_sources(paypal_pem: str) -> list[Source]:
    return [
        Stripe(secret="whsec_headers"),
        Paddle(secret="pdl_headers"),
        Shopify(secret="shpss_headers"),
        GitHub(secret="gh-headers"),
        StandardWebhooks(secret=STANDARD_SECRET),
        GitLabSigned(secret=STANDARD_SECRET, name="gitlab-signed"),
        GitLab(token=GITLAB_TOKEN),
        Slack(secret="slack-headers"),
        Square(secret="sq-headers", notification_url="https://example.com/webhooks/square"),
        LemonSqueezy(secret="lemon-headers"),
        Mollie(secret="mollie-headers"),
        # As docs/sources/hmac.md configures it for Mollie.
        HMACSource(
            name="mollie-hmac",
            secret="mollie-headers",
            signature_header="X-Mollie-Signature",
            signature_prefix="sha256=",
            time_field="createdAt",
        ),
        Twilio(secret="tw-headers", url="https://example.com/webhooks/twilio?sites=a,b"),
        PayPal(webhook_id="WH-HEADERS", certificate=paypal_pem),
        MollieClassic(fetch=fetch_payment),
        Resend(secret=STANDARD_SECRET),
        Clerk(secret=STANDARD_SECRET),
        Discord(public_key=ed25519_test_key().hex),
        Zoom(secret="zoom-headers"),
        Twitch(secret="twitch-headers"),
        # issue 23, round two
        WorkOS(secret="workos-headers"),
        Calendly(secret="calendly-headers"),
        Intercom(secret="intercom-headers"),
        Linear(secret="linear-headers"),
        Postmark(username="postmark", password="postmark-headers"),
        Mailgun(secret="mailgun-headers"),
        Typeform(secret="typeform-headers"),
    ]


def build_inbox(database_url: str, paypal_pem: str) -> Inbox:
    inbox = Inbox(database_url)
    for source in build_sources(paypal_pem):
        inbox.add_source(source)
    return inbox


def payload(source: Source, tag: str) -> Any:
    """A body for `source` naming a new event (`tag`: letters and digits)."""
    if isinstance(source, Paddle):
        return {"event_id": f"evt_{tag}", "event_type": "transaction.paid"}
    if isinstance(source, Slack):
        return {"event_id": f"Ev{tag}", "type": "event_callback", "event": {"type": "message"}}
    if isinstance(source, Square):
        return {"event_id": tag, "type": "payment.updated"}
    if isinstance(source, LemonSqueezy):
        return {"meta": {"event_name": "order_created"}, "data": {"type": "orders", "id": tag}}
    if isinstance(source, Twilio):
        return {"MessageSid": f"SM{tag}", "MessageStatus": "sent"}
    if isinstance(source, MollieClassic):
        return {"id": f"tr_{tag}"}
    if isinstance(source, Discord):
        # An interaction type Discord has not defined: stored, and answered with hookinbox's
        # own body (a known type is answered with Discord's deferred response instead).
        return {"id": str(1_179_000_000_000_000_000 + int(tag, 36) % 10**9), "type": 99}
    if isinstance(source, Zoom):
        return {"event": "meeting.started", "event_ts": int(tag, 36) % 10**12, "payload": {}}
    if isinstance(source, Twitch):
        return {"subscription": {"id": tag, "type": "channel.follow", "version": "2"}}
    # issue 23, round two
    if isinstance(source, Calendly):
        return {"event": "invitee.created", "payload": {"uri": f"https://calendly.test/i/{tag}"}}
    if isinstance(source, Linear):
        return {"type": "Issue", "action": "create", "data": {"id": tag}}
    if isinstance(source, Postmark):
        return {"RecordType": "Bounce", "ID": tag, "MessageID": tag}
    if isinstance(source, Mailgun):
        return {"event-data": {"id": tag, "event": "delivered"}}
    if isinstance(source, Typeform):
        return {"event_id": tag, "event_type": "form_response"}
    return {"id": f"evt_{tag}", "type": "order.paid", "created": 1_700_000_000}


def wrong_secret(source: Source) -> dict[str, Any]:
    """`sign` fields that sign with a secret the source does not hold."""
    if isinstance(source, PayPal):
        return {"private_key": rsa.generate_private_key(public_exponent=65537, key_size=2048)}
    if isinstance(source, StandardWebhooks):
        return {"secret": "whsec_" + base64.b64encode(b"another key").decode()}
    if isinstance(source, Discord):
        return {"private_key": Ed25519PrivateKey.generate()}
    return {"secret": "another-secret"}
