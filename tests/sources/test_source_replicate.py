"""Replicate: judged by Replicate's own SDK (`replicate` on PyPI, `Webhooks.validate`), with
deliveries signed by the `standardwebhooks` package (Replicate signs with Standard Webhooks)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
import standardwebhooks
from replicate.webhook import Webhooks, WebhookSigningSecret, WebhookValidationError

from hookinbox import Inbox
from hookinbox._errors import VerificationError
from hookinbox.sources import Replicate
from hookinbox.testing import sign as kit_sign

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # the Standard Webhooks specification's
OTHER = "whsec_" + "b3RoZXIga2V5IGJ5dGVz"
PREDICTION = {
    "id": "ufawqhfynnddngldkgtslldrkq",
    "model": "replicate/hello-world",
    "version": "5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa",
    "input": {"text": "Alice"},
    "output": "hello Alice",
    "status": "succeeded",
    "created_at": "2026-01-02T03:04:05.012345Z",
    "started_at": "2026-01-02T03:04:05.500000Z",
    "completed_at": "2026-01-02T03:04:06.000000Z",
}
BODY = json.dumps(PREDICTION).encode()
MESSAGE_ID = "msg_2pQ1replicate"


def sdk_verifies(headers: dict[str, str], body: bytes, secret: str) -> bool:
    try:
        Webhooks.validate(  # None when valid; raises otherwise
            headers=headers,
            body=body.decode(),
            secret=WebhookSigningSecret(key=secret),
            tolerance=300,
        )
    except WebhookValidationError:
        return False
    return True


def standard_signed(
    body: bytes = BODY, secret: str = SECRET, at: int | None = None
) -> dict[str, str]:
    now = int(time.time()) if at is None else at
    signature = standardwebhooks.Webhook(secret).sign(
        MESSAGE_ID, datetime.fromtimestamp(now, UTC), body.decode()
    )
    return {"webhook-id": MESSAGE_ID, "webhook-timestamp": str(now), "webhook-signature": signature}


def test_replicates_sdk_and_the_source_agree_on_a_standard_signature() -> None:
    headers = standard_signed()
    assert sdk_verifies(headers, BODY, SECRET)
    identity = Replicate(secret=SECRET).authenticate(headers, BODY, now=time.time())
    assert (identity.event_id, identity.event_type) == (MESSAGE_ID, "succeeded")
    assert identity.occurred_at == datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC)


@pytest.mark.parametrize(
    ("changes", "occurred"),
    [
        (
            {"status": "starting", "started_at": None, "completed_at": None},
            datetime(2026, 1, 2, 3, 4, 5, 12345, tzinfo=UTC),
        ),
        (
            {"status": "processing", "completed_at": None},
            datetime(2026, 1, 2, 3, 4, 5, 500000, tzinfo=UTC),
        ),
        ({"status": None, "created_at": None, "started_at": None, "completed_at": None}, None),
    ],
    ids=["starting", "processing", "no-status-nor-time"],
)
def test_the_type_is_the_status_and_the_time_the_latest_state(
    changes: dict[str, object], occurred: datetime | None
) -> None:
    body = json.dumps({**PREDICTION, **changes}).encode()
    identity = Replicate(secret=SECRET).authenticate(standard_signed(body), body, now=time.time())
    assert (identity.event_type, identity.occurred_at) == (changes["status"], occurred)


def test_what_replicates_sdk_refuses_the_source_refuses() -> None:
    now = int(time.time())
    for headers in (standard_signed(secret=OTHER), standard_signed(at=now - 301)):
        assert not sdk_verifies(headers, BODY, SECRET)
        with pytest.raises(VerificationError):
            Replicate(secret=SECRET).verify(headers, BODY, now=now)


def test_a_resent_webhook_keeps_its_id_and_is_a_duplicate(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/replicate.db")
    inbox.add_source(Replicate(secret=SECRET))
    first = inbox.receive("replicate", standard_signed(), BODY)
    resent = inbox.receive("replicate", standard_signed(at=int(time.time()) + 5), BODY)
    inbox.close()
    assert (first.body["status"], resent.body["status"]) == ("accepted", "duplicate")


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------


def test_the_kits_signer_is_verified_by_replicates_sdk() -> None:
    headers, body = kit_sign(
        Replicate(secret=SECRET), {**PREDICTION, "output": "café ☕"}, at=int(time.time())
    )
    assert sdk_verifies(headers, body, SECRET)
    assert not sdk_verifies(headers, body, OTHER)
