"""Discord, Zoom, Twitch, Resend, Clerk and Standard Webhooks `v1a`, judged by outside verifiers.

Forward: deliveries signed by the provider's SDK (svix, standardwebhooks) or, where no SDK signs,
by the documented recipe on Node's crypto (tests/testing/oracle.mjs), are accepted through
`inbox.receive` and again over HTTP (the ASGI app), where they are duplicates. Reverse:
`hookinbox.testing.sign` for each source, judged by the official verifier (discord-interactions'
`verifyKey`, svix, standardwebhooks) or the recipe. Handshakes: answered as the provider wants,
nothing stored, and a forged one is 401. One Node process per direction keeps this cheap.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import standardwebhooks
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from svix.webhooks import Webhook as SvixWebhook
from tests.support.asgi import ASGIClient
from tests.testing.npm_oracles import npm_judges, oracle_dir

from hookinbox import BadSignature, Inbox
from hookinbox._storage._schema import events
from hookinbox.sources import (
    Clerk,
    Discord,
    Handshake,
    Headers,
    Identity,
    Resend,
    Source,
    StandardWebhooks,
    Twitch,
    Zoom,
)
from hookinbox.testing import ed25519_test_key, sign

SVIX_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # the Standard Webhooks spec's example
ZOOM_SECRET = "zoom-secret-token-Qx7"
TWITCH_SECRET = "twitch-subscription-secret"
KEY = ed25519_test_key()
SEED = KEY.private_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()).hex()
NOW = int(time.time())

INTERACTION = {"type": 2, "id": "1179000000000000001", "token": "tok", "data": {"name": "ping"}}
ZOOM_EVENT = {"event": "meeting.ended", "event_ts": NOW * 1000, "payload": {"account_id": "a1"}}
TWITCH_NOTIFICATION = {
    "subscription": {"id": "sub-1", "type": "channel.follow", "version": "2", "status": "enabled"},
    "event": {"user_id": "1337", "user_name": "awesome_user"},
}
RESEND_EVENT = {"type": "email.delivered", "created_at": "2026-01-02T03:04:05.000Z", "data": {}}
CLERK_EVENT = {"type": "user.created", "object": "event", "timestamp": NOW * 1000, "data": {}}
STANDARD_EVENT = {"type": "invoice.paid", "timestamp": "2026-01-02T03:04:05Z", "data": {}}


@pytest.fixture(scope="module")
def oracle() -> Path:
    return oracle_dir()


@pytest.fixture(scope="module")
def inbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inbox]:
    inbox = Inbox(f"sqlite:///{tmp_path_factory.mktemp('handshakes') / 'inbox.db'}")
    for source in (
        Discord(public_key=KEY.hex),
        Zoom(secret=ZOOM_SECRET),
        Twitch(secret=TWITCH_SECRET),
        Resend(secret=SVIX_SECRET),
        Clerk(secret=SVIX_SECRET),
        StandardWebhooks(secret=SVIX_SECRET, public_key=KEY.whpk, name="migrating"),
        StandardWebhooks(public_key=KEY.whpk, name="v1a-only"),
        StandardWebhooks(secret=SVIX_SECRET, name="v1-only"),
    ):
        inbox.add_source(source)
    inbox.migrate()  # any test may be the first to read the table
    yield inbox
    inbox.close()


def stored(inbox: Inbox, source: str) -> list[tuple[str, str | None]]:
    with inbox.store.engine.connect() as connection:
        query = sa.select(events.c.event_id, events.c.event_type).where(events.c.source == source)
        return [(row.event_id, row.event_type) for row in connection.execute(query)]


def encoded(document: Any) -> bytes:
    return json.dumps(document).encode()


def test_deliveries_signed_by_the_sdks_and_recipes_are_stored_once(
    inbox: Inbox, oracle: Path
) -> None:
    now = int(time.time())  # signed now: the module may have been imported minutes ago
    # Twitch signs an RFC 3339 time with nanoseconds; the others Unix seconds.
    twitch_time = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.123456789Z")
    recipes = [
        ("discord", KEY.hex, INTERACTION, {"seed": SEED, "timestamp": now}),
        ("standard-v1a", "", STANDARD_EVENT, {"seed": SEED, "id": "msg_v1a_1", "timestamp": now}),
        (
            "twitch",
            TWITCH_SECRET,
            TWITCH_NOTIFICATION,
            {"id": "tw-msg-1", "timestamp": twitch_time},
        ),
        ("zoom", ZOOM_SECRET, ZOOM_EVENT, {"timestamp": now}),
    ]
    signed = npm_judges(
        oracle,
        [{"provider": p, "secret": s, "body": encoded(d), "sign": how} for p, s, d, how in recipes],
    )
    at = datetime.fromtimestamp(now, UTC)
    deliveries = [
        (name, answer["headers"], encoded(d))
        for (_, _, d, _), answer, name in zip(
            recipes, signed, ["discord", "v1a-only", "twitch", "zoom"], strict=True
        )
    ]
    for cls, event in ((Resend, RESEND_EVENT), (Clerk, CLERK_EVENT)):
        body = encoded(event)
        signature = SvixWebhook(SVIX_SECRET).sign("msg_svix_1", at, body.decode())
        headers = {"svix-id": "msg_svix_1", "svix-timestamp": str(now), "svix-signature": signature}
        deliveries.append((cls.default_name, headers, body))
    body = encoded(STANDARD_EVENT)
    signature = standardwebhooks.Webhook(SVIX_SECRET).sign("msg_v1_1", at, body.decode())
    v1 = {"webhook-id": "msg_v1_1", "webhook-timestamp": str(now), "webhook-signature": signature}
    deliveries += [("migrating", v1, body), ("v1-only", v1, body)]
    deliveries.append(("migrating", signed[1]["headers"], encoded(STANDARD_EVENT)))

    client = ASGIClient(inbox.asgi())
    for name, headers, body in deliveries:
        first = inbox.receive(name, headers, body)
        assert first.status_code == 200, (name, first.body)
        again = client.post(f"/webhooks/{name}", headers=headers, content=body)
        assert again.status_code == 200, (name, again.text)
        if name == "discord":  # Discord reads the answer: a deferred response, both times
            assert first.body == again.json() == {"type": 5}
        else:
            assert first.body["status"] == "accepted", (name, first.body)
            assert again.json() == {"status": "duplicate", "event_id": first.body["event_id"]}

    assert stored(inbox, "discord") == [("1179000000000000001", "application_command")]
    assert stored(inbox, "twitch") == [("tw-msg-1", "channel.follow")]
    assert stored(inbox, "resend") == [("msg_svix_1", "email.delivered")]
    assert stored(inbox, "clerk") == [("msg_svix_1", "user.created")]
    [(zoom_key, zoom_type)] = stored(inbox, "zoom")
    assert (zoom_key.startswith(f"meeting.ended:{NOW * 1000}:"), zoom_type) == (
        True,
        "meeting.ended",
    )
    assert sorted(stored(inbox, "migrating")) == [
        ("msg_v1_1", "invoice.paid"),
        ("msg_v1a_1", "invoice.paid"),
    ]


def test_the_kit_signs_as_the_official_verifiers_expect(inbox: Inbox, oracle: Path) -> None:
    requests = []
    for provider, source, document, fields in (
        ("discord", "discord", INTERACTION, {}),
        ("standard-v1a", "v1a-only", STANDARD_EVENT, {}),
        ("twitch", "twitch", TWITCH_NOTIFICATION, {}),
        ("zoom", "zoom", ZOOM_EVENT, {}),
    ):
        headers, body = sign(inbox.sources[source], document, **fields)
        secret = {"discord": KEY.hex, "standard-v1a": KEY.whpk}.get(provider)
        requests.append(
            {
                "provider": provider,
                "secret": secret or (TWITCH_SECRET if provider == "twitch" else ZOOM_SECRET),
                "headers": headers,
                "body": body,
            }
        )
        forged = dict(requests[-1], body=body + b" ")
        requests.append(forged)
    verdicts = [answer["valid"] for answer in npm_judges(oracle, requests)]
    assert verdicts == [True, False] * 4

    for source in ("resend", "clerk", "migrating"):
        headers, body = sign(inbox.sources[source], STANDARD_EVENT)
        SvixWebhook(SVIX_SECRET).verify(body, headers)  # raises unless valid
        if source == "migrating":  # both schemes: v1 for the SDK, v1a checked above
            assert headers["webhook-signature"].split()[1].startswith("v1a,")
            standardwebhooks.Webhook(SVIX_SECRET).verify(body, headers)


def test_handshakes_are_answered_and_nothing_is_stored(inbox: Inbox, oracle: Path) -> None:
    client = ASGIClient(inbox.asgi())
    ping = {"type": 1, "id": "1179000000000000002", "token": "t"}
    validation = {
        "event": "endpoint.url_validation",
        "event_ts": 1,
        "payload": {"plainToken": "qgg8vlvZRS6UYooatFL8Aw"},
    }
    challenge = {"challenge": "pogchamp-kappa-360noscope-vohiyo", **TWITCH_NOTIFICATION}
    [expected] = npm_judges(
        oracle,
        [
            {
                "provider": "zoom",
                "secret": ZOOM_SECRET,
                **dict(
                    zip(("headers", "body"), sign(inbox.sources["zoom"], validation), strict=True)
                ),
            }
        ],
    )
    cases = [
        ("discord", ping, {}, "application/json", b'{"type":1}'),
        (
            "zoom",
            validation,
            {},
            "application/json",
            encoded(
                {
                    "plainToken": "qgg8vlvZRS6UYooatFL8Aw",
                    "encryptedToken": expected["encryptedToken"],
                }
            ).replace(b" ", b""),
        ),
        (
            "twitch",
            challenge,
            {"message_type": "webhook_callback_verification"},
            "text/plain",
            b"pogchamp-kappa-360noscope-vohiyo",
        ),
    ]
    before = {name: stored(inbox, name) for name, *_ in cases}
    for name, document, fields, media_type, content in cases:
        headers, body = sign(inbox.sources[name], document, **fields)
        reply = inbox.receive(name, headers, body)
        assert (reply.status_code, reply.media_type.split(";")[0], reply.content) == (
            200,
            media_type,
            content,
        )
        response = client.post(f"/webhooks/{name}", headers=headers, content=body)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(media_type)
        assert response.content == content
        forged = client.post(f"/webhooks/{name}", headers=headers, content=body + b" ")
        assert forged.status_code == 401, forged.text
        unsigned = {k: v for k, v in headers.items() if "sig" not in k.lower()}
        assert inbox.receive(name, unsigned, body).status_code == 401
        assert stored(inbox, name) == before[name]


def test_twitch_revocations_are_events_and_old_messages_are_refused(inbox: Inbox) -> None:
    twitch = inbox.sources["twitch"]
    # A revocation carries its subscription only (no `event`), as Twitch sends it.
    revoked = {
        "subscription": {**TWITCH_NOTIFICATION["subscription"], "status": "authorization_revoked"}
    }
    headers, body = sign(twitch, revoked, message_type="revocation", message_id="tw-revoked-1")
    assert inbox.receive("twitch", headers, body).body["status"] == "accepted"
    assert ("tw-revoked-1", "revocation") in stored(inbox, "twitch")
    # Twitch's replay window: 10 minutes.
    late = sign(twitch, TWITCH_NOTIFICATION, at=time.time() - 660, message_id="tw-late")
    assert inbox.receive("twitch", *late).status_code == 401
    recent = sign(twitch, TWITCH_NOTIFICATION, at=time.time() - 540, message_id="tw-recent")
    assert inbox.receive("twitch", *recent).status_code == 200


def test_a_source_checks_only_the_schemes_it_has_keys_for(inbox: Inbox) -> None:
    v1a_only = sign(inbox.sources["v1a-only"], STANDARD_EVENT, message_id="msg_scheme")
    v1_only = sign(inbox.sources["v1-only"], STANDARD_EVENT, message_id="msg_scheme")
    refused = inbox.receive("v1-only", *v1a_only)
    assert (refused.status_code, refused.body["detail"]) == (
        401,
        "webhook-signature has no v1 signature",
    )
    refused = inbox.receive("v1a-only", *v1_only)
    assert (refused.status_code, refused.body["detail"]) == (
        401,
        "webhook-signature has no v1a signature",
    )
    assert inbox.receive("migrating", *v1a_only).status_code == 200


class Probe(Source):
    """A source of one's own whose provider wants its handshake answered 202 in CSV."""

    default_name = "probe"

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        if headers.get("x-probe") != "signed":
            raise BadSignature()

    def handshake(self, headers: Headers, body: bytes) -> Handshake | None:
        return Handshake("a,b\n", content_type="text/csv", status=202) if body == b"?" else None

    def identify(self, headers: Headers, body: bytes) -> Identity:
        return Identity(event_id="e1", event_type=None, occurred_at=None, payload=None)


def test_a_handshake_chooses_its_content_type_and_status(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path / 'probe.db'}")
    inbox.add_source(Probe())
    client = ASGIClient(inbox.asgi())
    response = client.post("/webhooks/probe", headers={"x-probe": "signed"}, content=b"?")
    assert (response.status_code, response.headers["content-type"], response.content) == (
        202,
        "text/csv",
        b"a,b\n",
    )
    assert client.post("/webhooks/probe", content=b"?").status_code == 401
    event = client.post("/webhooks/probe", headers={"x-probe": "signed"}, content=b"!")
    assert event.json() == {"status": "accepted", "event_id": "e1"}
    assert stored(inbox, "probe") == [("e1", None)]  # the event only, never the handshakes
    inbox.close()
