"""Azure Event Grid (Event Grid schema): judged by Event Grid's documented webhook protocol,
written again here: the `SubscriptionValidationEvent` as Event Grid's "endpoint validation"
page shows it, answered `{"validationResponse": <validationCode>}`; events as JSON arrays; the
secret a query parameter of the subscribed URL (or a secret delivery-property header). Event
Grid signs nothing and its SDKs ship no verifier for deliveries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.asgi import ASGIClient

from hookinbox import Inbox
from hookinbox._errors import BadSignature, ConfigurationError, Handshake, PayloadError
from hookinbox.sources import AzureEventGrid
from hookinbox.testing import sign as kit_sign

KEY = "eg-endpoint-key-3f9d0c"
TOPIC = "/subscriptions/0000/resourceGroups/shop/providers/Microsoft.Storage/storageAccounts/shop"
VALIDATION = [
    {
        "id": "2d1781af-3a4c-4d7c-bd0c-e34b19da4e66",
        "topic": TOPIC,
        "subject": "",
        "data": {
            "validationCode": "512d38b6-c7b8-40c8-89fe-f46f9e9622b6",
            "validationUrl": "https://rp-eastus2.eventgrid.azure.net:553/eventsubscriptions/"
            "shop/validate?id=512d38b6&t=2026-11-30T12:00:00.000Z&token=abc",
        },
        "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent",
        "eventTime": "2026-11-30T12:00:00.4556811Z",
        "metadataVersion": "1",
        "dataVersion": "1",
    }
]


def blob(ident: str) -> dict[str, Any]:
    return {
        "id": ident,
        "topic": TOPIC,
        "subject": f"/blobServices/default/containers/in/blobs/{ident}.json",
        "eventType": "Microsoft.Storage.BlobCreated",
        "eventTime": "2026-11-30T12:00:01.1234567Z",
        "data": {"api": "PutBlob", "contentLength": 524288},
        "dataVersion": "",
        "metadataVersion": "1",
    }


def body_of(events: list[dict[str, Any]]) -> bytes:
    return json.dumps(events).encode()


def test_the_validation_is_answered_with_its_code_when_the_key_is_in_the_url() -> None:
    source = AzureEventGrid(secret=KEY)
    with pytest.raises(Handshake) as raised:
        source.authenticate_batch(
            {"aeg-event-type": "SubscriptionValidation"}, body_of(VALIDATION), now=0,
            query={"key": [KEY]},
        )  # fmt: skip
    assert raised.value.answer == {"validationResponse": "512d38b6-c7b8-40c8-89fe-f46f9e9622b6"}


@pytest.mark.parametrize(
    "query",
    [None, {}, {"key": ["guessed"]}, {"key": [KEY, KEY]}, {"code": [KEY]}],
    ids=["no-query", "no-key", "wrong-key", "twice", "other-parameter"],
)
def test_without_the_key_even_the_validation_is_refused(query: dict[str, list[str]] | None) -> None:
    with pytest.raises(BadSignature):
        AzureEventGrid(secret=KEY).authenticate_batch({}, body_of(VALIDATION), now=0, query=query)


def test_a_validation_code_that_could_inject_is_a_bad_request() -> None:
    forged = [{**VALIDATION[0], "data": {"validationCode": '"}<script>'}}]
    with pytest.raises(PayloadError):
        AzureEventGrid(secret=KEY).authenticate_batch({}, body_of(forged), now=0,
                                                      query={"key": [KEY]})  # fmt: skip


def test_each_event_of_a_batch_is_its_own() -> None:
    source = AzureEventGrid(secret=["eg-next-key", KEY])
    events = source.authenticate_batch({}, body_of([blob("e1"), blob("e2")]), now=0,
                                       query={"key": [KEY]})  # fmt: skip
    assert [e.event_id for e in events] == ["e1", "e2"]
    assert events[0].event_type == "Microsoft.Storage.BlobCreated"
    assert events[0].occurred_at is not None and events[0].occurred_at.microsecond == 123456


def test_the_header_mode_reads_the_key_from_a_delivery_property() -> None:
    source = AzureEventGrid(secret=KEY, header="X-Eventgrid-Key")
    body = body_of([blob("h1")])
    [event] = source.authenticate_batch({"x-eventgrid-key": KEY}, body, now=0)
    assert event.event_id == "h1"
    with pytest.raises(BadSignature):
        source.authenticate_batch({"x-eventgrid-key": "guessed"}, body, now=0)
    with pytest.raises(ConfigurationError):
        AzureEventGrid(secret=KEY, header=" ")


def test_end_to_end_over_http_validation_batch_retry_and_forgery(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/event-grid.db")
    inbox.add_source(AzureEventGrid(secret=KEY))
    client = ASGIClient(inbox.asgi())
    url = f"/webhooks/azure-event-grid?key={KEY}"
    validated = client.post(url, content=body_of(VALIDATION))
    assert validated.json() == {"validationResponse": "512d38b6-c7b8-40c8-89fe-f46f9e9622b6"}
    first = client.post(url, headers={"aeg-delivery-count": "0"}, content=body_of([blob("b1")]))
    retry = client.post(url, headers={"aeg-delivery-count": "1"}, content=body_of([blob("b1")]))
    keyless = client.post("/webhooks/azure-event-grid", content=body_of([blob("b2")]))
    via_receive = inbox.receive("azure-event-grid", {}, body_of([blob("b3")]), query=f"key={KEY}")
    inbox.close()
    assert (first.json()["accepted"], retry.json()["duplicates"]) == (1, 1)
    assert (keyless.status_code, keyless.json()["error"]) == (401, "invalid_signature")
    assert via_receive.body["accepted"] == 1


def test_the_kit_signs_the_header_mode_and_says_why_it_cannot_sign_the_query() -> None:
    headers, _ = kit_sign(AzureEventGrid(secret=KEY, header="Authorization"), [blob("k1")])
    assert headers["authorization"] == KEY
    with pytest.raises(TypeError, match="query string"):
        kit_sign(AzureEventGrid(secret=KEY), [blob("k1")])
