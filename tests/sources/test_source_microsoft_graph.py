"""Microsoft Graph change notifications: judged by Graph's documented protocol, written again
here. The validation request (a POST with `?validationToken=`, answered with the decoded token
as `text/plain`, 200) and the notification collection (`value[]`, each with the subscription's
`clientState`) are replayed from Graph's "Set up notifications" and `changeNotification`
pages. Graph signs nothing and its SDKs ship no verifier: `clientState` is a shared secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from tests.support.asgi import ASGIClient

from hookinbox import Inbox
from hookinbox._errors import BadSignature, Handshake, PayloadError
from hookinbox.sources import MicrosoftGraph
from hookinbox.testing import sign as kit_sign

STATE = "secretClientValue-9a41"
SUBSCRIPTION = "7f105c7d-2dc5-4530-97cd-4e7ae6534c07"
TOKEN = (
    "Validation: Testing client application reachability for subscription Request-Id: "
    "6d6c3f0e-1b1e-4f9b-8a54-3a3f1f1b2c3d"
)


def notification(
    ident: str | None = "lsgTZMr9KwAAA", state: str = STATE, **more: Any
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "subscriptionId": SUBSCRIPTION,
        "subscriptionExpirationDateTime": "2026-12-01T22:11:09.952Z",
        "clientState": state,
        "changeType": "created",
        "resource": "Users/{user}/Messages/AAMkADk0",
        "tenantId": "84bd8158-6d4d-4958-8b9f-9d6445542f95",
        "resourceData": {
            "@odata.type": "#Microsoft.Graph.Message",
            "@odata.id": "Users/{user}/Messages/AAMkADk0",
            "@odata.etag": 'W/"CQAAABYAAADkrWGo7bouTKlsgTZMr9KwAAAUWRHf"',
            "id": "AAMkADk0",
        },
    }
    if ident is not None:
        item["id"] = ident
    return {**item, **more}


def collection(*items: dict[str, Any]) -> bytes:
    return json.dumps({"value": list(items)}).encode()


def test_the_validation_request_is_echoed_as_text_and_checked_first() -> None:
    source = MicrosoftGraph(client_state=STATE)
    with pytest.raises(Handshake) as raised:
        source.authenticate_batch({"content-type": "text/plain"}, b"", now=0,
                                  query={"validationToken": [TOKEN]})  # fmt: skip
    assert (raised.value.status, raised.value.content) == (200, TOKEN.encode())
    assert raised.value.content_type.startswith("text/plain")


@pytest.mark.parametrize(
    "token", ["<script>alert(1)</script>", "a\r\nSet-Cookie: x=1", 'a"b', "x" * 513, ""]
)
def test_a_token_that_could_inject_is_a_bad_request(token: str) -> None:
    with pytest.raises(PayloadError):
        MicrosoftGraph(client_state=STATE).check_query({"validationToken": [token]}, {}, b"")


def test_each_notification_is_its_own_event() -> None:
    lifecycle = {"subscriptionId": SUBSCRIPTION, "clientState": STATE,
                 "lifecycleEvent": "reauthorizationRequired", "tenantId": "t"}  # fmt: skip
    body = collection(notification(), lifecycle)
    change, renewal = MicrosoftGraph(client_state=STATE).authenticate_batch({}, body, now=0)
    assert change.event_id == f"{SUBSCRIPTION}:lsgTZMr9KwAAA"
    assert (change.event_type, renewal.event_type) == ("created", "reauthorizationRequired")
    assert renewal.event_id.startswith(f"{SUBSCRIPTION}:") and len(renewal.event_id) == 36 + 65


@pytest.mark.parametrize(
    "body",
    [
        collection(notification(state="guessed")),
        collection(notification(), notification(state="guessed")),  # one stranger is enough
        collection({k: v for k, v in notification().items() if k != "clientState"}),
        collection(notification(state=STATE.upper())),
        collection(),
        b'{"value": {}}',
        b"[]",
        b"not json",
    ],
    ids=["wrong", "mixed", "missing", "case", "empty", "not-a-list", "array", "not-json"],
)
def test_a_delivery_is_refused_unless_every_client_state_is_configured(body: bytes) -> None:
    with pytest.raises(BadSignature):
        MicrosoftGraph(client_state=STATE).verify({}, body, now=0)


def test_several_subscriptions_share_a_url_with_their_client_states() -> None:
    body = collection(notification("a"), notification("b", state="other-subscription-state"))
    source = MicrosoftGraph(client_state=[STATE, "other-subscription-state"])
    assert [i.event_id.split(":")[1] for i in source.authenticate_batch({}, body, now=0)] == [
        "a", "b"
    ]  # fmt: skip


def test_a_retry_after_a_renewal_is_a_duplicate_even_without_an_id(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/graph.db")
    inbox.add_source(MicrosoftGraph(client_state=STATE))
    client = ASGIClient(inbox.asgi())
    token = client.post(f"/webhooks/microsoft-graph?validationToken={quote(TOKEN)}",
                        headers={"content-type": "text/plain"}, content=b"")  # fmt: skip
    assert (token.status_code, token.text) == (200, TOKEN)
    assert token.headers["content-type"].startswith("text/plain")
    assert token.headers["x-content-type-options"] == "nosniff"
    first = client.post("/webhooks/microsoft-graph", content=collection(notification(None)))
    renewed = notification(None, subscriptionExpirationDateTime="2026-12-04T22:11:09.952Z")
    again = client.post("/webhooks/microsoft-graph", content=collection(renewed))
    forged = client.post("/webhooks/microsoft-graph", content=collection(notification("x", "no")))
    inbox.close()
    assert (first.json()["accepted"], again.json()["duplicates"]) == (1, 1)
    assert (forged.status_code, forged.json()["error"]) == (401, "invalid_signature")


def test_the_kits_signer_puts_the_client_state_in_every_notification() -> None:
    headers, body = kit_sign(MicrosoftGraph(client_state=STATE), {"value": [notification(), {}]})
    assert [item["clientState"] for item in json.loads(body)["value"]] == [STATE, STATE]
    _, forged = kit_sign(MicrosoftGraph(client_state=STATE), {"value": [{}]}, secret="x")
    with pytest.raises(BadSignature):
        MicrosoftGraph(client_state=STATE).verify(headers, forged, now=0)
