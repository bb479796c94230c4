"""Metric labels stay bounded whatever verified senders send.

What it proves: a real `hookinbox serve` (two HTTP processes and a worker) is sent authentic
deliveries with 200 distinct random event types, plus the types the app has handlers for, a
`*` handler's source, duplicates, forged deliveries and deliveries to 50 random unknown source
names. Afterwards `/metrics` has, for `hookinbox_deliveries_total` and
`hookinbox_processing_attempts_total`, `type` label values only from the handled types of each
source, `other` and (for deliveries refused before they were read) the empty string; `source`
values only from the configured sources and `unknown`. Nothing is lost by folding: the counters
add up to every delivery sent and every attempt made, and `other` holds the 200 random types.

How: the app (tests/apps/guarded.py) registers its handlers at import, in every process;
`/metrics` is scraped several times (it sums every process's counters, whichever answers).
"""

from __future__ import annotations

import json
import secrets
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hookinbox._metrics import OTHER_TYPE
from hookinbox.sources import Paddle, StandardWebhooks, Stripe
from hookinbox.testing import sign
from tests.apps import guarded
from tests.reliability._report import Trial, record
from tests.support.server import running_server
from tests.support.workers import wait_for

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

RANDOM_TYPES = 200
DUPLICATES = 10
FORGED = 10
UNKNOWN_SOURCES = 50
Labels = tuple[tuple[str, str], ...]


def stripe(event_id: str, event_type: str) -> tuple[dict[str, str], bytes]:
    obj = {"id": f"ch_{event_id}", "card_number": "4242 4242 4242 4242"}
    event = {
        "id": event_id,
        "type": event_type,
        "created": int(time.time()),
        "data": {"object": obj},
    }
    return sign(Stripe(secret=guarded.STRIPE_SECRET), event)


def paddle(event_id: str, event_type: str) -> tuple[dict[str, str], bytes]:
    event = {"event_id": event_id, "event_type": event_type}
    return sign(Paddle(secret=guarded.PADDLE_SECRET), event)


def standard(message_id: str, event_type: str) -> tuple[dict[str, str], bytes]:
    event = {"type": event_type, "data": {}}
    return sign(StandardWebhooks(secret=guarded.STANDARD_SECRET), event, message_id=message_id)


def random_type() -> str:
    return f"{secrets.choice(['order', 'charge', 'x'])}.{secrets.token_hex(6)}"


def deliveries() -> list[tuple[str, tuple[dict[str, str], bytes]]]:
    """(source, delivery): every kind of label a sender could try to grow."""
    plan: list[tuple[str, tuple[dict[str, str], bytes]]] = []
    for number in range(RANDOM_TYPES):
        plan.append(("stripe", stripe(f"evt_random_{number}", random_type())))
    plan += [("stripe", plan[n][1]) for n in range(DUPLICATES)]  # of random types
    for number, event_type in enumerate(sorted(guarded.HANDLED_TYPES["stripe"])):
        plan.append(("stripe", stripe(f"evt_known_{number}", event_type)))
    for number in range(20):
        plan.append(("paddle", paddle(f"evt_paddle_{number}", random_type())))
    plan.append(("standard", standard("msg_known", "order.created")))
    plan += [("standard", standard(f"msg_random_{n}", random_type())) for n in range(20)]
    for number in range(FORGED):  # refused before the type is read
        _, body = stripe(f"evt_forged_{number}", random_type())
        plan.append(("stripe", ({"Stripe-Signature": f"t=1,v1={'0' * 64}"}, body)))
    for _ in range(UNKNOWN_SOURCES):
        plan.append((f"nowhere-{secrets.token_hex(6)}", stripe("evt_lost", random_type())))
    return plan


def samples(text: str, name: str) -> Counter[Labels]:
    found: Counter[Labels] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] += int(sample.value)
    return found


def label_values(counted: Counter[Labels], label: str) -> dict[str, set[str]]:
    """source -> the values of `label` seen with it."""
    by_source: dict[str, set[str]] = {}
    for labels in counted:
        values = dict(labels)
        by_source.setdefault(values["source"], set()).add(values[label])
    return by_source


def test_type_and_source_labels_stay_bounded(tmp_path: Path) -> None:
    plan = deliveries()
    sent_types = {json.loads(body).get("type") or json.loads(body).get("event_type")
                  for _, (_, body) in plan}  # fmt: skip
    database_url = f"sqlite:///{tmp_path / 'inbox.db'}"
    with running_server("tests.apps.guarded:inbox", database_url, workers=2) as base_url:
        with httpx.Client(base_url=base_url, timeout=30) as client:
            statuses = Counter(
                client.post(f"/webhooks/{source}", headers=headers, content=body).status_code
                for source, (headers, body) in plan
            )
            accepted = len(plan) - DUPLICATES - FORGED - UNKNOWN_SOURCES

            def scrape() -> str:
                return client.get("/metrics").text

            def all_attempted() -> bool:
                attempts = samples(scrape(), "hookinbox_processing_attempts_total")
                return sum(attempts.values()) >= accepted

            wait_for(all_attempted, timeout=45, what=f"{accepted} processing attempts")
            scrapes = [scrape() for _ in range(4)]  # answered by either HTTP process
    assert statuses == Counter({200: accepted + DUPLICATES, 401: FORGED, 404: UNKNOWN_SOURCES})
    assert len(sent_types) > RANDOM_TYPES

    allowed = {source: {*types, OTHER_TYPE} for source, types in guarded.HANDLED_TYPES.items()}
    for text in scrapes:
        delivered = samples(text, "hookinbox_deliveries_total")
        attempted = samples(text, "hookinbox_processing_attempts_total")
        delivered_types = label_values(delivered, "type")
        assert set(delivered_types) == {"stripe", "paddle", "standard", "unknown"}
        assert delivered_types["unknown"] == {""}  # never read: no type
        for source in ("stripe", "paddle", "standard"):
            assert delivered_types[source] - {""} <= allowed[source], source
            assert label_values(attempted, "type")[source] <= allowed[source], source
        assert delivered_types["stripe"] == {*guarded.HANDLED_TYPES["stripe"], OTHER_TYPE, ""}
        assert delivered_types["paddle"] == {OTHER_TYPE}  # a '*' handler names no type
        # Folded, not dropped: every delivery and every attempt is counted.
        assert sum(delivered.values()) == len(plan)
        assert sum(attempted.values()) == accepted
        folded = (("outcome", "accepted"), ("source", "stripe"), ("type", OTHER_TYPE))
        assert delivered[folded] == RANDOM_TYPES
    last = samples(scrapes[-1], "hookinbox_deliveries_total")
    outside = [
        (source, value)
        for source, values in label_values(last, "type").items()
        for value in values - {""} - allowed.get(source, set())
    ]
    record(
        Trial(
            fault="200 random event types and 50 random source names from senders",
            backend="sqlite",
            deliveries=len(plan),
            lost=len(plan) - sum(last.values()),  # deliveries the counters missed
            doubled=statuses[200] - accepted - DUPLICATES,  # forged or unknown answered 200
            detail=f"{len(sent_types)} distinct types sent, {len(last)} delivery series on "
            f"/metrics, {len(outside)} type values outside (handled per source, other, ''); "
            "sources: 3 configured + unknown; "
            f"{accepted} attempts counted across 2 HTTP processes and the worker",
        )
    )
