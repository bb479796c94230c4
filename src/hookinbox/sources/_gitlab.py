"""GitLab, in its two forms.

`GitLab`: the classic secret token. GitLab sends the configured token as it stands in
`X-Gitlab-Token`; it is compared in constant time (as SHA-256 digests, so neither its content
nor its length leaks). The token is a shared password, not a signature: anyone who sees one
delivery can forge others, and nothing binds it to the body.

`GitLabSigned`: GitLab's signed webhooks, which follow Standard Webhooks (`webhook-id`,
`webhook-timestamp`, `webhook-signature`); the verification is `StandardWebhooks`' own.

Keys. Token mode: `Idempotency-Key` (GitLab keeps it across retries of one delivery), falling
back to `X-Gitlab-Event-UUID` for GitLab versions that send no `Idempotency-Key`; never
`X-Gitlab-Webhook-UUID`, which the provider facts list as not stable. Signed mode: `webhook-id`,
which is part of the signed bytes. The type is `X-Gitlab-Event` (`Push Hook`) in both modes;
GitLab's bodies carry no common event time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from hookinbox._errors import BadSignature
from hookinbox.sources._base import Source
from hookinbox.sources._identity import Identity, event_key, optional_text, parse_json_object
from hookinbox.sources._provider import body_id, json_headers, provider
from hookinbox.sources._secrets import secrets_tuple, utf8_keys
from hookinbox.sources._signatures import (
    Headers,
    check_signature_count,
    header_values,
    matches_any,
    signature_items,
    token_digest,
)
from hookinbox.sources._standard_webhooks import (
    EXAMPLE_SECRET,
    PROVIDER,
    StandardWebhooks,
    example_event,
    standard_headers,
)

# GitLab does not retry on its own; a delivery is resent by hand from the hook's recent events,
# which GitLab keeps for a few days (not confirmed how many): a week covers it.
GITLAB_REDELIVERY = timedelta(days=7)
GITLAB_HEADERS = (
    "idempotency-key",
    "x-gitlab-event",
    "x-gitlab-event-uuid",
    "x-gitlab-webhook-uuid",
    "x-gitlab-instance",
)


def _gitlab_type(headers: Headers) -> str | None:
    return optional_text(headers.get("x-gitlab-event"))


class GitLab(Source):
    """The secret token form: `X-Gitlab-Token`. Never stored with the event."""

    default_name = "gitlab"
    redelivery_window = GITLAB_REDELIVERY
    stored_headers = GITLAB_HEADERS
    signature_headers = ("x-gitlab-token",)

    def __init__(self, *, token: str | Sequence[str], name: str | None = None) -> None:
        super().__init__(name=name)
        self._digests = [hashlib.sha256(key).digest() for key in utf8_keys(token)]
        self._tokens = secrets_tuple(token)  # for hookinbox.testing's signer

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        # Every value, and (for values a WSGI server joined) each comma-separated part: a
        # token may hold a comma, a signature list cannot, so both are candidates.
        values = header_values(headers, "x-gitlab-token")
        given = list(
            dict.fromkeys(
                [*values, *signature_items(headers, "x-gitlab-token", what="X-Gitlab-Token")]
            )
        )
        check_signature_count(len(given), "X-Gitlab-Token")
        if not any([matches_any(token_digest(token), self._digests) for token in given]):
            raise BadSignature("X-Gitlab-Token does not match a configured token")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        raw_key = headers.get("idempotency-key") or headers.get("x-gitlab-event-uuid")
        return Identity(
            event_id=event_key(raw_key, "Idempotency-Key or X-Gitlab-Event-UUID header"),
            event_type=_gitlab_type(headers),
            occurred_at=None,
            payload=payload,
        )


class GitLabSigned(StandardWebhooks):
    """The signed form: Standard Webhooks headers, keyed by the signed `webhook-id`."""

    default_name = "gitlab"
    redelivery_window = GITLAB_REDELIVERY
    stored_headers = (*StandardWebhooks.stored_headers, *GITLAB_HEADERS)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        identity = super().identify(headers, body)
        return dataclasses.replace(identity, event_type=_gitlab_type(headers), occurred_at=None)


EXAMPLE_TOKEN = "jéton-ünïcode ☕"
"""Typed with accents: GitLab sends its UTF-8 bytes."""


def sign(source: GitLab, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    token = fields.pop("secret", None) or source._tokens[0]
    key = fields.pop("idempotency_key", None) or body_id(source, body)
    return {
        **json_headers(fields),
        "User-Agent": "GitLab/17.5.0",
        "X-Gitlab-Event": fields.pop("event", "Push Hook"),
        "X-Gitlab-Token": token,
        "X-Gitlab-Instance": fields.pop("instance", "https://gitlab.example.com"),
        "X-Gitlab-Webhook-UUID": str(uuid.uuid4()),  # new on every attempt: never the key
        "X-Gitlab-Event-UUID": key,
        "Idempotency-Key": key,
    }


def sign_signed(
    source: GitLabSigned, body: bytes, t: int, fields: dict[str, Any]
) -> dict[str, str]:
    event = fields.pop("event", "Push Hook")
    headers = standard_headers(source, body, t, fields)
    # GitLab sends the delivery's Idempotency-Key as the signed webhook-id.
    return {**headers, "X-Gitlab-Event": event, "Idempotency-Key": headers["webhook-id"]}


GITLAB = provider(
    GitLab,
    sign=sign,
    example=lambda keys: GitLab(token=EXAMPLE_TOKEN),
    event=example_event,
    signature_header="X-Gitlab-Token",
)
GITLAB_SIGNED = provider(
    GitLabSigned,
    sign=sign_signed,
    example=lambda keys: GitLabSigned(secret=EXAMPLE_SECRET, name="gitlab-signed"),
    event=example_event,
    signature_header="webhook-signature",
    forgery=PROVIDER.forgery,
)
