"""Azure Event Grid (Event Grid schema): a key you put in the subscription's URL, and the
`SubscriptionValidationEvent` answered with its code.

Event Grid signs nothing it delivers to a webhook. What proves a delivery is a secret of yours
that Event Grid sends with it: a query parameter of the endpoint URL you subscribe
(`https://<host>/webhooks/azure-event-grid?key=<secret>`, as Event Grid's documentation
describes), or, with `header=`, a header set as a secret delivery property of the subscription.
It is compared with every configured secret in constant time (as digests, `matches_secret`)
before anything else, the validation included: a request without it is 401 and is not read.
The query string is read only for this source (`reads_query`). In the query mode `verify`
alone checks nothing (it has no query): `authenticate(..., query=)` and every entry point do.

The handshake: when a subscription is created, Event Grid POSTs one event of type
`Microsoft.EventGrid.SubscriptionValidationEvent`, and wants `{"validationResponse": <its
data.validationCode>}` back (200). It comes to the same URL, so it carries the key too; the
code is bounded (512 characters of base64 and `-._~`) and nothing is stored.

Deliveries are batches, a JSON array of events (one by default; up to the subscription's
"max events per batch", which must stay within hookinbox's 1,000). Each is stored under its
`id`, which Event Grid repeats on every retry; the type is `eventType`, the time `eventTime`.

Only the Event Grid schema: a subscription with the CloudEvents schema is validated with an
HTTP OPTIONS request (`WebHook-Request-Origin`): `AzureEventGridCloudEvents`
(`_azure_event_grid_cloudevents.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ClassVar

from hookinbox._errors import BadSignature, ConfigurationError, Handshake, PayloadError
from hookinbox.sources._base import BatchSource
from hookinbox.sources._handshakes import Query, challenge_text, query_value
from hookinbox.sources._identity import (
    Identity,
    event_key,
    optional_text,
    parse_json,
    parse_time,
)
from hookinbox.sources._json_slices import array_items
from hookinbox.sources._provider import json_headers, provider
from hookinbox.sources._secrets import utf8_keys
from hookinbox.sources._signatures import Headers, matches_secret, presented_tokens

VALIDATION = "Microsoft.EventGrid.SubscriptionValidationEvent"


class AzureEventGrid(BatchSource):
    default_name = "azure-event-grid"
    # Event Grid retries with backoff for up to 24 hours (its default retry policy); a day's
    # margin.
    redelivery_window = timedelta(days=2)
    stored_headers = ("aeg-event-type", "aeg-subscription-name", "aeg-delivery-count")
    reads_query: ClassVar[bool] = True

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        query_parameter: str = "key",
        header: str | None = None,
        name: str | None = None,
    ) -> None:
        """The key travels in the query parameter `query_parameter` of the subscribed URL, or,
        when `header` is given, in that header (a secret delivery property) instead."""
        super().__init__(name=name)
        self._secrets = utf8_keys(secret)
        if header is not None and not header.strip():
            raise ConfigurationError("header must name a header")
        if not query_parameter:
            raise ConfigurationError("query_parameter must name a query parameter")
        self.header = None if header is None else header.strip().lower()
        self.query_parameter = None if header is not None else query_parameter
        self.signature_headers = () if self.header is None else (self.header,)

    def check_query(self, query: Query, headers: Headers, body: bytes) -> None:
        if self.query_parameter is None:
            return None
        try:
            given = query_value(query, self.query_parameter)
        except PayloadError as exc:  # given twice: which one would be the key?
            raise BadSignature(exc.message) from exc
        if given is None or not matches_secret(given, self._secrets):
            raise BadSignature(f"the {self.query_parameter} query parameter is not the key")
        return None

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        if self.header is None:
            return  # the key was in the query string, checked by check_query
        given = presented_tokens(headers, self.header, what=self.header)
        if not any([matches_secret(value, self._secrets) for value in given]):
            raise BadSignature(f"{self.header} is not the configured secret")

    def handshake(self, headers: Headers, body: bytes) -> Handshake | None:
        events = parse_json(body)
        if not (isinstance(events, list) and len(events) == 1 and isinstance(events[0], dict)):
            return None
        event = events[0]
        if event.get("eventType") != VALIDATION:
            return None
        data = event.get("data")
        code = data.get("validationCode") if isinstance(data, dict) else None
        if not isinstance(code, str):
            raise PayloadError("the validation event has no validationCode")
        return Handshake({"validationResponse": challenge_text(code, "validationCode")})

    def identify_batch(self, headers: Headers, body: bytes) -> list[Identity]:
        return self.identify_items(array_items(body), _event)


def _event(item: Any) -> Identity:
    if not isinstance(item, dict):
        raise PayloadError("an event of the batch is not a JSON object")
    return Identity(
        event_id=event_key(item.get("id")),
        event_type=optional_text(item.get("eventType")),
        occurred_at=parse_time(item.get("eventTime")),
        payload=item,
    )


def sign(source: AzureEventGrid, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # Event Grid's "signature": the key as you configured it, sent as it is.
    if source.header is None:
        raise TypeError(
            "AzureEventGrid's key travels in the query string: send it as "
            f"?{source.query_parameter}=<secret> (inbox.receive(..., query=...))"
        )
    secret = fields.pop("secret", None) or source._secrets[0].decode()
    return {**json_headers(fields), source.header: secret, "aeg-event-type": "Notification"}


PROVIDER = provider(
    AzureEventGrid,
    sign=sign,
    example=lambda keys: AzureEventGrid(secret="event-grid-example-key", header="Authorization"),
    event=lambda tag: [
        {
            "id": f"2d1781af-3a4c-4d7c-bd0c-{tag}",
            "topic": "/subscriptions/0000/resourceGroups/shop/providers/Microsoft.Storage/"
            "storageAccounts/shop",
            "subject": f"/blobServices/default/containers/in/blobs/{tag}.json",
            "eventType": "Microsoft.Storage.BlobCreated",
            "eventTime": "2026-11-30T12:00:00.1234567Z",
            "data": {"api": "PutBlob", "contentLength": 524288},
            "dataVersion": "",
            "metadataVersion": "1",
        }
    ],
    signature_header="Authorization",
    batch_key=lambda events: str(events[0]["id"]),
)
