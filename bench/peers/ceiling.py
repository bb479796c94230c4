"""The HTTP ceiling: what a receiver costs on this server with no database at all (issue 21).

A raw ASGI callable, served exactly as the other peers are (`python -m uvicorn`, the same
process count, uvloop and httptools, no access log: the settings `hookinbox serve` gives
uvicorn): read the body, check the Stripe signature, parse the JSON, answer 200 with the same
JSON as the bare peer. Nothing is stored, so a 200 here promises nothing; the ceiling is the
line a durable receiver can approach, never pass, and `bench/ingest.py` reports every peer
against it ("vs ceiling").

The signature is checked with the standard-library recipe every peer shares
(`peers/_verify.py`: one HMAC-SHA256 over `{t}.{body}`, `hmac.compare_digest`, the 300 s
tolerance), not with `hookinbox.sources.Stripe`, for two reasons:
- the ceiling is the reference the ratios are taken against, so it must not move when
  hookinbox changes: made faster or slower, hookinbox's own source would shift the ceiling
  with hookinbox and hide the change from the "vs ceiling" column;
- it then differs from `peers/bare.py` by the database alone (the code below is bare.py's,
  line for line, less the insert), so bare / ceiling is what one durable insert per request
  costs, and hookinbox / ceiling is everything hookinbox does beyond the minimum, its stricter
  header checks included (repeated headers, signature counts, the BOM refusal).
Either way the ceiling moves little: in process the recipe takes 3.9 us per 700-byte event,
`Stripe.check_and_verify` 6.8 us (2026-12-02), of the ~60 us of CPU a request costs here.
"""

from __future__ import annotations

import json
from typing import Any

from bench.peers._verify import verified


async def _reply(send: Any, status: int, document: dict[str, str]) -> None:
    body = json.dumps(document).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["method"] != "POST":
        await _reply(send, 200, {"status": "ok"})  # the readiness probe
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    header = dict(scope["headers"]).get(b"stripe-signature", b"").decode()
    if not verified(header, body):
        await _reply(send, 401, {"status": "rejected"})
        return
    event_id = json.loads(body)["id"]
    await _reply(send, 200, {"status": "accepted", "event_id": event_id})
