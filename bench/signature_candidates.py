"""Benchmark: what 16 signature candidates cost against one, on a 1 MiB body (issue 31, item 3).

    python bench/signature_candidates.py            # 1 MiB bodies, 9 runs each: ~30 s
    python bench/signature_candidates.py --smoke    # 64 KiB, 3 runs; what CI runs

An unsigned request may list up to `MAX_SIGNATURES` (16) candidates. Where each candidate
makes the source hash the whole body again, an attacker buys 16 times the CPU of an honest
delivery with one request. For each source below, in this process: `authenticate` of one
unsigned delivery of `--size` bytes carrying 1 wrong candidate, 2 (the most of a costly kind
a delivery may carry since issue 31, `MAX_EXPENSIVE_CANDIDATES`), then 16 (distinct,
well-formed), `time.process_time` per call, median of `--runs`; the ratios 2/1 and 16/1 come
from the same run, back to back. "Wrong" is the attack: nothing matches, so every candidate
is tried. Cases: Discord and Standard Webhooks `v1a` (Ed25519, whose hash covers the
signature's own R: nothing to share between candidates), Stripe with 16 `t=...,v1=...`
groups (a timestamp each, so a signed message each) and with 16 `v1` in one group, SendGrid
(ECDSA P-256), Standard Webhooks `v1` and GitHub (one HMAC per secret, compared with each
candidate). The sources run with one key or secret each. Raw JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from bench._common import save, summary
from hookinbox._errors import HookinboxError
from hookinbox._headers import normalize_headers
from hookinbox.sources import Discord, GitHub, SendGrid, Source, StandardWebhooks, Stripe

NOW = int(time.time())
ED25519 = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"bench ed25519").digest())
ED25519_PUBLIC = ED25519.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
P256 = ec.derive_private_key(31337, ec.SECP256R1())
P256_PUBLIC = base64.b64encode(
    P256.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
).decode()
STANDARD_SECRET = "whsec_" + base64.b64encode(b"bench standard secret").decode()

Headers = Callable[[int], dict[str, str]]
"""Headers carrying `n` wrong, distinct, well-formed candidates."""


def _wrong_ed25519(n: int) -> list[bytes]:
    """Real signatures of other messages: well-formed, and wrong for the body."""
    return [ED25519.sign(b"another message %d" % i) for i in range(n)]


def _wrong_hex(n: int) -> list[str]:
    return [hashlib.sha256(b"wrong %d" % i).hexdigest() for i in range(n)]


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


CASES: dict[str, tuple[Callable[[], Source], Headers]] = {
    "Discord (Ed25519)": (
        lambda: Discord(public_key=ED25519_PUBLIC.hex()),
        lambda n: {
            "x-signature-ed25519": ",".join(s.hex() for s in _wrong_ed25519(n)),
            "x-signature-timestamp": str(NOW),
        },
    ),
    "Standard Webhooks v1a (Ed25519)": (
        lambda: StandardWebhooks(public_key="whpk_" + _b64(ED25519_PUBLIC)),
        lambda n: {
            "webhook-id": "msg_bench",
            "webhook-timestamp": str(NOW),
            "webhook-signature": " ".join("v1a," + _b64(s) for s in _wrong_ed25519(n)),
        },
    ),
    "Stripe, a t= group per candidate": (
        lambda: Stripe(secret="whsec_bench"),
        lambda n: {
            "stripe-signature": ",".join(f"t={NOW - i},v1={h}" for i, h in enumerate(_wrong_hex(n)))
        },
    ),
    "Stripe, one t= and n v1=": (
        lambda: Stripe(secret="whsec_bench"),
        lambda n: {"stripe-signature": ",".join([f"t={NOW}", *(f"v1={h}" for h in _wrong_hex(n))])},
    ),
    "SendGrid (ECDSA P-256)": (
        lambda: SendGrid(public_key=P256_PUBLIC),
        lambda n: {
            "x-twilio-email-event-webhook-signature": ",".join(
                _b64(P256.sign(b"another message %d" % i, ec.ECDSA(hashes.SHA256())))
                for i in range(n)
            ),
            "x-twilio-email-event-webhook-timestamp": str(NOW),
        },
    ),
    "Standard Webhooks v1 (HMAC)": (
        lambda: StandardWebhooks(secret=STANDARD_SECRET),
        lambda n: {
            "webhook-id": "msg_bench",
            "webhook-timestamp": str(NOW),
            "webhook-signature": " ".join(
                "v1," + _b64(hashlib.sha256(b"%d" % i).digest()) for i in range(n)
            ),
        },
    ),
    "GitHub (HMAC)": (
        lambda: GitHub(secret="bench github secret"),
        lambda n: {"x-hub-signature-256": ",".join("sha256=" + h for h in _wrong_hex(n))},
    ),
}


def body_of(size: int) -> bytes:
    """A JSON array of about `size` bytes (SendGrid's shape; the others never parse it)."""
    item = {"sg_event_id": "x" * 20, "event": "open", "email": "someone@example.com"}
    one = len(json.dumps(item)) + 2
    return json.dumps([item] * max(1, size // one)).encode()


def cpu_ms(source: Source, headers: dict[str, str], body: bytes, runs: int) -> tuple[float, str]:
    """Median CPU of `authenticate` (the delivery is refused: every candidate is tried)."""
    normalized = normalize_headers(headers)
    times, answer = [], ""
    for _ in range(runs):
        started = time.process_time()
        try:
            source.authenticate(normalized, body, now=NOW)
            answer = "accepted"
        except HookinboxError as error:
            answer = f"refused: {type(error).__name__}: {error.message}"
        times.append((time.process_time() - started) * 1000)
    return statistics.median(times), answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2**20, help="body bytes (default 1 MiB)")
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--smoke", action="store_true", help="64 KiB, 3 runs")
    args = parser.parse_args()
    if args.smoke:
        args.size, args.runs = 64 * 1024, 3
    body = body_of(args.size)
    rows = []
    print(f"{len(body):,}-byte body, 1 vs {args.candidates} wrong candidates, median of "
          f"{args.runs} (CPU ms, this process, pid {os.getpid()})")  # fmt: skip
    print(f"  {'case':36} {'1':>7} {'2':>7} {args.candidates:>7}  ratios 2/1, n/1")
    for name, (build, headers) in CASES.items():
        source = build()
        one, _ = cpu_ms(source, headers(1), body, args.runs)
        two, _ = cpu_ms(source, headers(2), body, args.runs)
        many, answer = cpu_ms(source, headers(args.candidates), body, args.runs)
        rows.append(
            {
                "case": name,
                "one_ms": one,
                "two_ms": two,
                "many_ms": many,
                "ratio_two": two / one,
                "ratio": many / one,
                "answer": answer,
            }
        )
        print(
            f"  {name:36} {one:7.2f} {two:7.2f} {many:7.2f}  x{two / one:4.1f} "
            f"x{many / one:4.1f}  ({answer[:44]})"
        )
    document = {
        "size": len(body),
        "candidates": args.candidates,
        "runs": args.runs,
        "cases": rows,
        "ratio": summary([row["ratio"] for row in rows]),
        "ratio_two": summary([row["ratio_two"] for row in rows]),
    }
    path = save("signature_candidates", document)
    print(f"raw results: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
