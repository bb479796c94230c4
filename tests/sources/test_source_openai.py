"""OpenAI: judged by OpenAI's own SDK (`openai` on PyPI, `client.webhooks.verify_signature`
and `unwrap`), with deliveries signed by the `standardwebhooks` package (OpenAI signs with
Standard Webhooks)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
import standardwebhooks
from openai import InvalidWebhookSignatureError
from openai import OpenAI as OpenAIClient

from hookinbox import Inbox
from hookinbox._errors import VerificationError
from hookinbox.sources import OpenAI
from hookinbox.testing import sign as kit_sign

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # the Standard Webhooks specification's
OTHER = "whsec_" + "b3RoZXIga2V5IGJ5dGVz"  # "other key bytes"
EVENT = {
    "object": "event",
    "id": "evt_685343a1381c819085d44c354e1b330e",
    "type": "response.completed",
    "created_at": 1_750_287_018,
    "data": {"id": "resp_abc123"},
}
BODY = json.dumps(EVENT).encode()
MESSAGE_ID = "wh_685342e6c53c8190a1be43f081506c52"


def sdk_verifies(headers: dict[str, str], body: bytes, secret: str) -> bool:
    client = OpenAIClient(api_key="sk-test", webhook_secret=secret)
    try:
        client.webhooks.verify_signature(body, headers)
    except InvalidWebhookSignatureError:
        return False
    return True


def standard_signed(
    body: bytes = BODY, secret: str = SECRET, at: int | None = None
) -> dict[str, str]:
    """Headers as a Standard Webhooks sender (OpenAI) makes them, by the standard's library."""
    now = int(time.time()) if at is None else at
    signature = standardwebhooks.Webhook(secret).sign(
        MESSAGE_ID, datetime.fromtimestamp(now, UTC), body.decode()
    )
    return {"webhook-id": MESSAGE_ID, "webhook-timestamp": str(now), "webhook-signature": signature}


def test_openais_sdk_and_the_source_agree_on_a_standard_signature() -> None:
    headers = standard_signed()
    assert sdk_verifies(headers, BODY, SECRET)
    event = OpenAIClient(api_key="sk-test").webhooks.unwrap(BODY, headers, secret=SECRET)
    assert event.type == "response.completed"
    identity = OpenAI(secret=SECRET).authenticate(headers, BODY, now=time.time())
    assert (identity.event_id, identity.event_type) == (MESSAGE_ID, event.type)
    assert identity.occurred_at == datetime.fromtimestamp(1_750_287_018, UTC)


def test_what_openais_sdk_refuses_the_source_refuses() -> None:
    now = int(time.time())
    stranger = standard_signed(secret=OTHER)
    stale = standard_signed(at=now - 301)
    for headers in (stranger, stale):
        assert not sdk_verifies(headers, BODY, SECRET)
        with pytest.raises(VerificationError):
            OpenAI(secret=SECRET).verify(headers, BODY, now=now)


def test_a_retry_keeps_the_webhook_id_and_is_a_duplicate(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/openai.db")
    inbox.add_source(OpenAI(secret=SECRET))
    first = inbox.receive("openai", standard_signed(), BODY)
    retry = inbox.receive("openai", standard_signed(at=int(time.time()) + 5), BODY)
    inbox.close()
    assert (first.body["status"], retry.body["status"]) == ("accepted", "duplicate")
    assert first.event_type == "response.completed"


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------


def test_the_kits_signer_is_verified_by_openais_sdk() -> None:
    source = OpenAI(secret=SECRET)
    headers, body = kit_sign(source, {**EVENT, "note": "café ☕"}, at=int(time.time()))
    assert sdk_verifies(headers, body, SECRET)
    assert not sdk_verifies(headers, body, OTHER)
