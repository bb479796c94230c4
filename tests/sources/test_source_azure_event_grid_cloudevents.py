"""Azure Event Grid (CloudEvents v1.0 schema): judged by the protocol Event Grid documents,
written again here: the abuse-protection validation of the CloudEvents webhook specification
(an OPTIONS request with `WebHook-Request-Origin`, answered 200 with `WebHook-Allowed-Origin`
and `WebHook-Allowed-Rate`), events in structured mode (`application/cloudevents+json`, one
object) and batches (`application/cloudevents-batch+json`, an array), each event named by
`source` + `id` as the CloudEvents specification promises. Event Grid signs nothing: the proof
is the key in the subscribed URL, as for the Event Grid schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.asgi import ASGIClient

from hookinbox import Inbox
from hookinbox._errors import BadSignature, Handshake, PayloadError, VerificationError
from hookinbox.sources import AzureEventGrid, AzureEventGridCloudEvents

KEY = "eg-endpoint-key-3f9d0c"
SOURCE = "/subscriptions/0000/resourceGroups/shop/providers/Microsoft.Storage/storageAccounts/shop"
URL = f"/webhooks/azure-event-grid-cloudevents?key={KEY}"


def cloud_event(ident: str, source: str = SOURCE) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "type": "Microsoft.Storage.BlobCreated",
        "source": source,
        "id": ident,
        "time": "2026-11-30T12:00:01.1234567Z",
        "subject": f"/blobServices/default/containers/in/blobs/{ident}.json",
        "datacontenttype": "application/json",
        "data": {"api": "PutBlob", "contentLength": 524288},
    }


def options(source: AzureEventGridCloudEvents, headers: dict[str, str], key: str | None = KEY
            ) -> Any:  # fmt: skip
    query = {} if key is None else {"key": [key]}
    return source.answer_options(query, headers)


def test_the_validation_allows_the_origin_when_the_key_is_in_the_url() -> None:
    answer = options(
        AzureEventGridCloudEvents(secret=KEY), {"webhook-request-origin": "eventgrid.azure.net"}
    )
    assert isinstance(answer, Handshake) and answer.status == 200 and answer.answer == ""
    assert answer.headers["webhook-allowed-origin"] == "eventgrid.azure.net"
    assert answer.headers["webhook-allowed-rate"] == "*"


def test_a_requested_rate_is_granted_as_asked() -> None:
    headers = {"webhook-request-origin": "eventgrid.azure.net", "webhook-request-rate": "120"}
    answer = options(AzureEventGridCloudEvents(secret=KEY), headers)
    assert answer.headers["webhook-allowed-rate"] == "120"


@pytest.mark.parametrize("key", [None, "guessed"], ids=["no-key", "wrong-key"])
def test_without_the_key_no_origin_is_allowed(key: str | None) -> None:
    with pytest.raises(BadSignature):
        options(AzureEventGridCloudEvents(secret=KEY),
                {"webhook-request-origin": "eventgrid.azure.net"}, key)  # fmt: skip


def test_the_header_mode_wants_the_key_header_on_the_options_request_too() -> None:
    source = AzureEventGridCloudEvents(secret=KEY, header="X-Eventgrid-Key")
    origin = {"webhook-request-origin": "eventgrid.azure.net"}
    assert options(source, {**origin, "x-eventgrid-key": KEY}, None).status == 200
    with pytest.raises(VerificationError):
        options(source, origin, None)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"webhook-request-origin": "evil.example\r\nset-cookie: a=b"},
        {"webhook-request-origin": "<script>"},
        {"webhook-request-origin": "x" * 300},
        {"webhook-request-origin": "eventgrid.azure.net", "webhook-request-rate": "lots"},
    ],
    ids=["no-origin", "header-injection", "markup", "too-long", "bad-rate"],
)
def test_an_origin_that_is_not_a_host_name_is_a_bad_request(headers: dict[str, str]) -> None:
    with pytest.raises(PayloadError):
        options(AzureEventGridCloudEvents(secret=KEY), headers)


def test_one_structured_event_and_a_batch_each_store_source_and_id() -> None:
    source = AzureEventGridCloudEvents(secret=KEY)
    [one] = source.authenticate_batch(
        {"content-type": "application/cloudevents+json; charset=utf-8"},
        json.dumps(cloud_event("c1")).encode(), now=0, query={"key": [KEY]},
    )  # fmt: skip
    assert one.event_id == f"{SOURCE}:c1"
    assert one.event_type == "Microsoft.Storage.BlobCreated"
    assert one.occurred_at is not None and one.occurred_at.microsecond == 123456
    batch = source.authenticate_batch(
        {"content-type": "application/cloudevents-batch+json"},
        json.dumps([cloud_event("c2"), cloud_event("c2", "/other/topic")]).encode(), now=0,
        query={"key": [KEY]},
    )  # fmt: skip
    # The same id from two sources is two events: CloudEvents' identity is the pair.
    assert [e.event_id for e in batch] == [f"{SOURCE}:c2", "/other/topic:c2"]


def test_a_source_past_the_key_length_is_hashed_and_a_binary_event_refused() -> None:
    source = AzureEventGridCloudEvents(secret=KEY)
    long_source = "/" + "s" * 300
    [event] = source.authenticate_batch({}, json.dumps(cloud_event("c3", long_source)).encode(),
                                        now=0, query={"key": [KEY]})  # fmt: skip
    assert event.event_id.endswith(":c3") and len(event.event_id) == 64 + 3
    with pytest.raises(PayloadError):
        source.authenticate_batch({"ce-id": "c4"}, b'{"api": "PutBlob"}', now=0,
                                  query={"key": [KEY]})  # fmt: skip


def test_an_event_grid_validation_event_is_not_answered_by_the_cloudevents_source() -> None:
    validation = [{"id": "v", "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent",
                   "data": {"validationCode": "abc"}}]  # fmt: skip
    [stored] = AzureEventGridCloudEvents(secret=KEY).authenticate_batch(
        {}, json.dumps(validation).encode(), now=0, query={"key": [KEY]}
    )
    assert stored.invalid is not None  # no CloudEvent source: not an event of this schema


def test_end_to_end_over_http_options_deliveries_and_refusals(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/cloudevents.db")
    inbox.add_source(AzureEventGridCloudEvents(secret=KEY))
    inbox.add_source(AzureEventGrid(secret=KEY))
    client = ASGIClient(inbox.asgi())
    origin = {"webhook-request-origin": "eventgrid.azure.net"}
    allowed = client.request("OPTIONS", URL, headers=origin)
    keyless = client.request("OPTIONS", "/webhooks/azure-event-grid-cloudevents", headers=origin)
    other = client.request("OPTIONS", f"/webhooks/azure-event-grid?key={KEY}", headers=origin)
    structured = {"content-type": "application/cloudevents+json; charset=utf-8"}
    first = client.post(URL, headers=structured, content=json.dumps(cloud_event("e1")).encode())
    retry = client.post(URL, headers=structured, content=json.dumps(cloud_event("e1")).encode())
    forged = client.post(
        "/webhooks/azure-event-grid-cloudevents?key=guessed",
        headers=structured,
        content=json.dumps(cloud_event("e2")).encode(),
    )
    inbox.close()
    assert (allowed.status_code, allowed.headers["webhook-allowed-origin"]) == (
        200,
        "eventgrid.azure.net",
    )
    assert allowed.headers["x-content-type-options"] == "nosniff"
    assert (keyless.status_code, keyless.json()["error"]) == (403, "invalid_signature")
    assert "webhook-allowed-origin" not in keyless.headers
    # A source that does not answer OPTIONS keeps 405, naming what it takes.
    assert (other.status_code, other.headers["allow"]) == (405, "POST")
    assert (first.json()["accepted"], retry.json()["duplicates"]) == (1, 1)
    assert (forged.status_code, forged.json()["error"]) == (401, "invalid_signature")
    assert first.json()["events"] == 1
