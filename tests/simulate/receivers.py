"""Receivers for the simulator's tests, served by uvicorn in a subprocess (see conftest).

- `POST /naive`: the tutorial bug on purpose. No signature check; on a checkout it SELECTs the
  order by payment id, does "some work" (5 ms), then INSERTs if the SELECT found nothing, in a
  table without a unique constraint. Concurrent duplicates both pass the check.
- `POST /flaky/{fails}`: answers 503 to the first `fails` deliveries of each event id, then
  200, and records every delivery it read (`GET /log`), to check retry timing.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

DATABASE = os.environ.get("NAIVE_RECEIVER_DB", "naive.db")
connection = sqlite3.connect(DATABASE, isolation_level=None, check_same_thread=False)
connection.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, payment_id TEXT)")

attempts: dict[str, int] = {}
log: list[dict[str, object]] = []


async def naive(request: Request) -> Response:
    event = json.loads(await request.body())
    if event.get("type") == "checkout.session.completed":
        payment = event["data"]["object"]["payment_intent"]
        found = connection.execute(
            "SELECT id FROM orders WHERE payment_id = ?", (payment,)
        ).fetchone()
        await asyncio.sleep(0.005)
        if found is None:
            connection.execute("INSERT INTO orders (payment_id) VALUES (?)", (payment,))
    return JSONResponse({"status": "ok"})


async def flaky(request: Request) -> Response:
    # A moment before reading the body, as a loaded server takes: a client that hangs up
    # right after sending is gone by then, and the delivery is lost, not just its answer.
    await asyncio.sleep(0.01)
    body = await request.body()
    headers = request.headers
    key = headers.get("webhook-id") or headers.get("x-github-delivery") or json.loads(body)["id"]
    count = attempts[key] = attempts.get(key, 0) + 1
    status = 503 if count <= request.path_params["fails"] else 200
    signature = request.headers.get("stripe-signature", "")
    log.append({"id": key, "at": time.monotonic(), "status": status, "sig": signature})
    return JSONResponse({"attempt": count}, status_code=status)


async def read_log(_request: Request) -> Response:
    return JSONResponse(log)


async def healthz(_request: Request) -> Response:
    return JSONResponse({"status": "ok"})


app = Starlette(
    routes=[
        Route("/naive", naive, methods=["POST"]),
        Route("/flaky/{fails:int}", flaky, methods=["POST"]),
        Route("/log", read_log),
        Route("/healthz", healthz),
    ]
)
