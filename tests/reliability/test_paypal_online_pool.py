"""PayPal verified online: one call per webhook id, in a pool of its own (issue 31, item 2).

With `PayPal(online=PayPalAPI(...))`, every delivery is verified by asking PayPal's API. One
unsigned delivery listing 16 comma-joined signatures used to cost 32 calls (16 candidates x 2
webhook ids, the whole body sent each time), and 40 such deliveries at once held every one
of anyio's 40 worker threads while PayPal took its time: `/metrics`, which reads the
database in a worker thread, waited 20 s, and forged requests got 503.

What it proves, against a real `hookinbox serve` (one HTTP process) and a loopback imitation
of PayPal's API that counts and can hold its answers:
- a delivery is one question to PayPal per configured webhook id at most: 16 distinct
  signatures are refused (401) without a call, the right signature repeated 8 times (as
  many as the header's 4,096 characters hold) is one question and is accepted, and one
  forged signature is two questions (two webhook ids), answered 401;
- while PayPal holds 40 forged deliveries' questions, `/metrics` answers and a Stripe
  delivery is stored, because online verification runs in a bounded pool of its own
  (`NETWORK_VERIFICATIONS` per source), not in anyio's shared worker threads; once PayPal
  answers, all 40 are 401.
"""

from __future__ import annotations

import base64
import dataclasses
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from hookinbox._receiver._anyio import NETWORK_VERIFICATIONS
from tests.apps import paypal_online
from tests.reliability._report import Trial, record
from tests.support import paypal
from tests.support.loopback import Loopback, Request, serving
from tests.support.pki import paypal_signing
from tests.support.server import free_port, hookinbox_command
from tests.support.server import serving as serving_process
from tests.support.signing import stripe_delivery

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

KEY = paypal_signing().key
assert isinstance(KEY, rsa.RSAPrivateKey)
VERIFY = "/v1/notifications/verify-webhook-signature"
FLOOD = 40


@dataclasses.dataclass
class PayPalAPI:
    imitation: paypal.PayPalImitation
    loopback: Loopback
    open: threading.Event


@pytest.fixture
def paypal_api() -> Iterator[PayPalAPI]:
    imitation = paypal.PayPalImitation(paypal_signing().certificate.public_key())  # type: ignore[arg-type]
    gate = threading.Event()
    gate.set()

    def respond(request: Request) -> tuple[int, dict[str, str], bytes]:
        if request.path == VERIFY:
            gate.wait(120)  # held while the test says so: PayPal taking its time
        return imitation.respond(request)

    with serving(respond) as loopback:
        yield PayPalAPI(imitation, loopback, gate)
        gate.set()


@contextmanager
def _serve(paypal_api: PayPalAPI, tmp_path: Path, ack_deadline: float) -> Iterator[str]:
    port = free_port()
    command = hookinbox_command(
        "serve", "tests.apps.paypal_online:inbox", "--database-url",
        f"sqlite:///{tmp_path / 'inbox.db'}", "--port", str(port), "--workers", "1",
        "--no-worker", "--ack-deadline", str(ack_deadline), "--log-level", "warning",
    )  # fmt: skip
    with serving_process(command, port, env={"PAYPAL_API_URL": paypal_api.loopback.url}) as url:
        yield url


@pytest.fixture
def server(paypal_api: PayPalAPI, tmp_path: Path) -> Iterator[str]:
    with _serve(paypal_api, tmp_path, ack_deadline=30) as url:
        yield url


def _forged(number: int, signatures: int = 1) -> tuple[dict[str, str], bytes]:
    """A delivery PayPal never sent, with `signatures` distinct signatures: short base64, so
    that 16 fit in the 4,096 characters a signature header may have (PayPal's API, not
    hookinbox, is what would judge them)."""
    headers, body = paypal.delivery(KEY, paypal.capture_completed(f"WH-FORGED-{number}"))
    forged = [base64.b64encode(b"forged %03d" % n).decode() for n in range(signatures)]
    return {**headers, "PAYPAL-TRANSMISSION-SIG": ",".join(forged)}, body


def _post_forged(
    pool: ThreadPoolExecutor, client: httpx.Client, numbers: range
) -> list[Future[httpx.Response]]:
    """Forged deliveries posted at once, each from a thread of `pool`."""
    deliveries = [_forged(number) for number in numbers]
    return [
        pool.submit(client.post, "/webhooks/paypal", headers=headers, content=body)
        for headers, body in deliveries
    ]


def _wait_for_questions(paypal_api: PayPalAPI, count: int) -> None:
    deadline = time.monotonic() + 30
    while paypal_api.loopback.count(VERIFY) < count:
        assert time.monotonic() < deadline, "the deliveries never reached PayPal"
        time.sleep(0.05)


def test_one_question_to_paypal_per_webhook_id_at_most(paypal_api: PayPalAPI, server: str) -> None:
    asked = []
    with httpx.Client(base_url=server, timeout=60) as client:

        def post(headers: dict[str, str], body: bytes) -> int:
            before = paypal_api.loopback.count(VERIFY)
            status = client.post("/webhooks/paypal", headers=headers, content=body).status_code
            asked.append(paypal_api.loopback.count(VERIFY) - before)
            return status

        sixteen = post(*_forged(1, signatures=16))
        headers, body = paypal.delivery(KEY, paypal.capture_completed("WH-GENUINE-1"))
        paypal_api.imitation.send(headers, body)
        signature = headers["PAYPAL-TRANSMISSION-SIG"]
        repeated = post({**headers, "PAYPAL-TRANSMISSION-SIG": ",".join([signature] * 8)}, body)
        one_forged = post(*_forged(2))
    assert (sixteen, repeated, one_forged) == (401, 200, 401)
    webhook_ids = len(paypal_online.WEBHOOK_IDS)
    assert asked == [0, 1, webhook_ids]  # the genuine one matches the first id asked
    record(
        Trial(
            fault="PayPal online: 16 signatures in one delivery, the right one 8 times, one forged",
            backend="sqlite",
            deliveries=3,
            detail=f"questions to PayPal per delivery {asked} with {webhook_ids} webhook ids "
            "(16 distinct: 401 without a call; it used to be 32); answers 401, 200, 401",
        )
    )


def test_paypal_holding_its_answers_starves_nothing_else(
    paypal_api: PayPalAPI, server: str
) -> None:
    paypal_api.open.clear()  # PayPal takes its time from now on
    with ThreadPoolExecutor(FLOOD) as pool, httpx.Client(base_url=server, timeout=60) as client:
        flood = _post_forged(pool, client, range(100, 100 + FLOOD))
        _wait_for_questions(paypal_api, NETWORK_VERIFICATIONS)
        time.sleep(1.0)  # the rest of the flood arrives and waits
        held = paypal_api.loopback.count(VERIFY)
        started = time.monotonic()
        metrics = client.get("/metrics", timeout=10)
        metrics_seconds = time.monotonic() - started
        headers, body = stripe_delivery(
            {"id": "evt_during_flood", "type": "invoice.paid", "created": int(time.time())},
            paypal_online.STRIPE_SECRET,
        )
        stripe = client.post("/webhooks/stripe", headers=headers, content=body, timeout=10)
        paypal_api.open.set()
        answers = [future.result().status_code for future in flood]
    assert metrics.status_code == 200
    assert stripe.status_code == 200, stripe.text
    assert held == NETWORK_VERIFICATIONS  # the pool's bound, not anyio's 40 threads
    assert answers == [401] * FLOOD
    record(
        Trial(
            fault=f"PayPal online holding its answers, {FLOOD} forged deliveries at once",
            backend="sqlite",
            deliveries=FLOOD + 1,
            detail=f"{held} questions in flight (the pool's bound), the rest waiting; meanwhile "
            f"/metrics 200 in {metrics_seconds:.1f} s and a Stripe delivery 200; once PayPal "
            f"answered: 401x{FLOOD}",
        )
    )


def test_no_free_slot_within_the_ack_deadline_is_503(paypal_api: PayPalAPI, tmp_path: Path) -> None:
    extra = 4
    with _serve(paypal_api, tmp_path, ack_deadline=1) as url, ThreadPoolExecutor(16) as pool:
        paypal_api.open.clear()
        with httpx.Client(base_url=url, timeout=60) as client:
            sent = _post_forged(pool, client, range(200, 200 + NETWORK_VERIFICATIONS))
            _wait_for_questions(paypal_api, NETWORK_VERIFICATIONS)
            queued = _post_forged(pool, client, range(300, 300 + extra))
            done, _ = wait(queued, timeout=30)  # answered while PayPal still holds the others
            paypal_api.open.set()
            held = [future.result() for future in sent]
            waited = [future.result() for future in queued]
    assert len(done) == extra
    assert [r.status_code for r in held] == [401] * NETWORK_VERIFICATIONS
    assert [(r.status_code, r.json()["error"]) for r in waited] == [(503, "unavailable")] * extra
    assert all(r.headers["retry-after"] for r in waited)
    # The queued deliveries never asked PayPal: only the held ones did, once per webhook id.
    assert paypal_api.loopback.count(VERIFY) == NETWORK_VERIFICATIONS * len(
        paypal_online.WEBHOOK_IDS
    )
    record(
        Trial(
            fault="PayPal online holding its answers past a 1 s ack deadline",
            backend="sqlite",
            deliveries=NETWORK_VERIFICATIONS + extra,
            detail=f"{NETWORK_VERIFICATIONS} in the pool: 401 once PayPal answered; {extra} "
            "more found no free slot within the deadline: 503 with Retry-After, PayPal never "
            "asked about them",
        )
    )
