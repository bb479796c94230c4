"""Azure Event Grid (CloudEvents v1.0 schema): the key of `AzureEventGrid`, and the OPTIONS
validation of CloudEvents' abuse protection.

A subscription whose event delivery schema is CloudEvents v1.0 is not validated with a
`SubscriptionValidationEvent`: Event Grid sends an HTTP OPTIONS request to the endpoint with
`WebHook-Request-Origin` (the sender's DNS name, `eventgrid.azure.net`), and delivers only once
the answer allows that origin (`WebHook-Allowed-Origin`, and `WebHook-Allowed-Rate`, which is
required when the request named a rate with `WebHook-Request-Rate`). The OPTIONS request goes to
the subscribed URL, so it carries the same key as every delivery (`?key=` or the secret
header): the origin is allowed only when the key matches, else 403, and nothing is stored
either way. `WebHook-Request-Callback` (a URL to call instead of answering) is never fetched:
the synchronous answer is the one this source gives.

Deliveries are CloudEvents in structured mode: one event (`application/cloudevents+json`, a
JSON object) or a batch (`application/cloudevents-batch+json`, a JSON array), told apart by the
body. CloudEvents promises that `source` + `id` identify an event, so each is stored under
`<source>:<id>`, or `<sha256 of source>:<id>` when that would pass the key's 255 characters;
the type is `type`, the time `time`. Binary mode (`ce-` headers) is not Event Grid's webhook
delivery and is refused (400).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, ClassVar

from hookinbox._errors import Handshake, MissingHeader, PayloadError
from hookinbox._model import MAX_KEY_LENGTH
from hookinbox.sources._azure_event_grid import AzureEventGrid
from hookinbox.sources._azure_event_grid import sign as key_headers
from hookinbox.sources._handshakes import HandshakeAnswer, Query
from hookinbox.sources._identity import (
    Identity,
    event_key,
    optional_text,
    parse_json,
    parse_time,
)
from hookinbox.sources._json_slices import JsonSlice, array_items
from hookinbox.sources._provider import provider
from hookinbox.sources._signatures import Headers, header_values

ORIGIN = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")
"""A `WebHook-Request-Origin`: a DNS name, echoed in a header, so nothing that could break a
header line or name anything but a host."""
RATE = re.compile(r"[0-9]{1,9}")
STRUCTURED = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"


class AzureEventGridCloudEvents(AzureEventGrid):
    default_name = "azure-event-grid-cloudevents"
    answers_options: ClassVar[bool] = True

    def answer_options(self, query: Query, headers: Headers) -> HandshakeAnswer:
        # The key first, as on every delivery: without it nothing of the request is read.
        if self.query_parameter is not None:
            self.check_query(query, headers, b"")
        else:
            self.verify(headers, b"", now=0.0)
        origins = _values(headers, "webhook-request-origin")
        if len(origins) != 1 or not ORIGIN.fullmatch(origins[0].strip()):
            raise PayloadError("WebHook-Request-Origin must be given once, as a DNS name")
        answer = {"webhook-allowed-origin": origins[0].strip(), "allow": "OPTIONS, POST"}
        rates = _values(headers, "webhook-request-rate")
        if len(rates) > 1 or (rates and not RATE.fullmatch(rates[0].strip())):
            raise PayloadError("WebHook-Request-Rate must be given at most once, as a number")
        # The rate asked is granted: the receiver's own limits (the ack deadline, 503) pace it.
        answer["webhook-allowed-rate"] = rates[0].strip() if rates else "*"
        return Handshake("", headers=answer)

    def handshake(self, headers: Headers, body: bytes) -> Handshake | None:
        return None  # CloudEvents' validation is the OPTIONS request, never a POST

    def identify_batch(self, headers: Headers, body: bytes) -> list[Identity]:
        if _values(headers, "ce-id"):
            raise PayloadError("a binary-mode CloudEvent: Event Grid delivers structured mode")
        if body.lstrip()[:1] == b"[":
            items = array_items(body)
        else:  # one event, structured mode: the body is the event
            items = [JsonSlice(parse_json(body), body)]
        return self.identify_items(items, _event)


def _values(headers: Headers, name: str) -> list[str]:
    """Every value of a header that may be absent (each value apart, as `header_values`)."""
    try:
        return header_values(headers, name)
    except MissingHeader:
        return []


def _event(item: Any) -> Identity:
    if not isinstance(item, dict):
        raise PayloadError("a CloudEvent is not a JSON object")
    ident = event_key(item.get("id"), "CloudEvent id")
    origin = item.get("source")
    if not isinstance(origin, str) or not origin:
        raise PayloadError("no source in the CloudEvent")
    key = f"{origin}:{ident}"
    if len(key) > MAX_KEY_LENGTH or not key.isprintable():
        key = f"{hashlib.sha256(origin.encode()).hexdigest()}:{ident}"
    return Identity(
        event_id=event_key(key),
        event_type=optional_text(item.get("type")),
        occurred_at=parse_time(item.get("time")),
        payload=item,
    )


def sign(
    source: AzureEventGridCloudEvents, body: bytes, t: int, fields: dict[str, Any]
) -> dict[str, str]:
    # The key as AzureEventGrid sends it; the content type says one event or a batch.
    fields.setdefault("content_type", BATCH if body.lstrip()[:1] == b"[" else STRUCTURED)
    return key_headers(source, body, t, fields)


EXAMPLE_SOURCE = (
    "/subscriptions/0000/resourceGroups/shop/providers/Microsoft.Storage/storageAccounts/shop"
)

PROVIDER = provider(
    AzureEventGridCloudEvents,
    sign=sign,
    example=lambda keys: AzureEventGridCloudEvents(
        secret="event-grid-example-key", header="Authorization"
    ),
    event=lambda tag: {
        "specversion": "1.0",
        "id": f"9aeb0fdf-c01e-0131-0922-{tag}",
        "source": EXAMPLE_SOURCE,
        "subject": f"/blobServices/default/containers/in/blobs/{tag}.json",
        "type": "Microsoft.Storage.BlobCreated",
        "time": "2026-11-30T12:00:00.1234567Z",
        "datacontenttype": "application/json",
        "data": {"api": "PutBlob", "contentLength": 524288},
    },
    signature_header="Authorization",
    batch_key=lambda event: f"{event['source']}:{event['id']}",
)
