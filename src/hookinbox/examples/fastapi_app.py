"""The example shop (hookinbox.examples.shop) in a FastAPI app, worker included.

    SHOP_DATABASE_URL=sqlite:///shop.db uvicorn hookinbox.examples.fastapi_app:app

Deliveries arrive at POST /webhooks/{source} through hookinbox's router; GET /orders lists
what the handlers made of them. The worker runs in a thread of each server process, started and
stopped with the app (the lifespan): enough for one small service. To scale processing apart
from serving, drop the lifespan and run `hookinbox worker hookinbox.examples.fastapi_app:inbox`.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import FastAPI

import hookinbox.fastapi
from hookinbox import WorkerOptions
from hookinbox.examples.shop import all_orders, inbox


@asynccontextmanager
async def run_worker(_app: FastAPI) -> AsyncIterator[None]:
    # Signals belong to the server: it stops the app, and the app stops the worker.
    worker = inbox.worker(WorkerOptions(handle_signals=False))
    thread = threading.Thread(target=worker.run, name="hookinbox-worker")
    thread.start()
    try:
        yield
    finally:
        worker.stop()  # attempts in flight finish within the worker's grace period
        await anyio.to_thread.run_sync(thread.join)
        inbox.close()


app = FastAPI(title="Example shop", lifespan=run_worker)
app.include_router(hookinbox.fastapi.router(inbox))


@app.get("/orders")
def list_orders() -> list[dict[str, Any]]:
    return all_orders()
