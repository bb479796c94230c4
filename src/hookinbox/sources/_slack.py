"""Slack Events API: `X-Slack-Signature: v0=<hex>`, HMAC-SHA256 over `v0:{timestamp}:{body}`.

The timestamp is `X-Slack-Request-Timestamp`; the key is the body's `event_id`, which Slack
keeps when it retries (`X-Slack-Retry-Num` counts the attempts and is never part of the key).
A verified `url_verification` request is Slack checking the URL: it is answered with its
`challenge` and nothing is stored. `app_rate_limited` notices carry no event id; they are
stored under `app_rate_limited:<team>:<minute>` so an operator sees that events were dropped.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox._errors import PayloadError
from hookinbox.sources._hmac_preset import HMACPreset, TimestampedHMACPresetSource, declare
from hookinbox.sources._identity import (
    Identity,
    event_key,
    lookup,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._signatures import Headers

RATE_LIMITED = "app_rate_limited"


class Slack(TimestampedHMACPresetSource):
    default_name = "slack"
    # Three retries, the last about 5 minutes after the first attempt; no manual resend.
    redelivery_window = timedelta(hours=1)
    stored_headers = (
        "x-slack-signature",
        "x-slack-request-timestamp",
        "x-slack-retry-num",
        "x-slack-retry-reason",
    )
    preset = HMACPreset(
        "X-Slack-Signature",
        message="v0:{timestamp}:{body}",
        timestamp_header="X-Slack-Request-Timestamp",
        prefix="v0=",
    )

    def handshake(self, headers: Headers, body: bytes) -> dict[str, Any] | None:
        if b"url_verification" not in body:  # spare every event a second parse
            return None
        payload = parse_json_object(body)
        if payload.get("type") != "url_verification":
            return None
        challenge = payload.get("challenge")
        if optional_text(challenge, limit=1024) is None:
            raise PayloadError("url_verification without a usable challenge")
        return {"challenge": challenge}

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        if payload.get("type") == RATE_LIMITED:
            team = event_key(payload.get("team_id"), "team_id")
            minute = event_key(payload.get("minute_rate_limited"), "minute_rate_limited")
            return Identity(
                event_id=event_key(f"{RATE_LIMITED}:{team}:{minute}"),
                event_type=RATE_LIMITED,
                occurred_at=parse_time(payload.get("minute_rate_limited")),
                payload=payload,
            )
        return Identity(
            event_id=event_key(payload.get("event_id"), "event_id"),
            event_type=optional_text(lookup(payload, "event.type")),
            occurred_at=parse_time(payload.get("event_time")),
            payload=payload,
        )


def sent_headers(source: Slack, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    retry = fields.pop("retry", 0)
    if retry:
        return {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
    return {}


PROVIDER = declare(
    Slack,
    headers=sent_headers,
    event=lambda tag: {
        "event_id": f"Ev{tag}",
        "type": "event_callback",
        "event": {"type": "message"},
    },
)
