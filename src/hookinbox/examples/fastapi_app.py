"""The example shop (hookinbox.examples.shop) in a FastAPI app, worker included.

    SHOP_DATABASE_URL=sqlite:///shop.db uvicorn hookinbox.examples.fastapi_app:app

Deliveries arrive at POST /webhooks/{source} through hookinbox's router; GET /orders lists
what the handlers made of them. The worker runs in each server process, started and stopped
with the app (the lifespan, `inbox.running()`): enough for one small service. To scale
processing apart from serving, drop the lifespan and run
`hookinbox worker hookinbox.examples.fastapi_app:inbox`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

import hookinbox.fastapi
from hookinbox.examples.shop import all_orders, inbox


@asynccontextmanager
async def run_worker(_app: FastAPI) -> AsyncIterator[None]:
    # The server owns the signals: it stops the app, and leaving the block stops the worker
    # (attempts in flight finish within its grace period).
    async with inbox.running():
        yield
    inbox.close()


app = FastAPI(title="Example shop", lifespan=run_worker)
app.include_router(hookinbox.fastapi.router(inbox))


@app.get("/orders")
def list_orders() -> list[dict[str, Any]]:
    return all_orders()
