"""Who asks a store's gateways (issue 49, item 4): storage itself and the services, no one else.

Callers ask a service (`_operations/_service.py`: the command line, the dashboard, the gauges,
the scheduled jobs, the test kit; `_processing/_service.py`: the processor, the queues, the
relay, the heartbeat, a handler's context, the async worker), which is then the one module on
its side that knows an inbox's data is one store: a change to several stores would touch the
services, not their callers. The receiver stores a delivery, and hands a source that learns
its secret on first use (Asana) the store's `trust` gateway (the ingest side, `_receiver/`).
The check is the issue's re-count (with `trust` added), a text search, so the two cannot
disagree.
"""

from __future__ import annotations

import re
from pathlib import Path

import hookinbox

PACKAGE = Path(hookinbox.__file__).parent
GATEWAY_CALL = re.compile(
    r"store\.(ingest|events|messages|operator|housekeeping|stats|liveness|ordering|outbox|trust|erasure)\b"
)
SERVICES = frozenset({"_operations/_service.py", "_processing/_service.py"})
INGEST_SIDE = "_receiver/"
AT_MOST = 3
"""Modules outside storage that ask gateways: the operations and processing services, and
the ingest side's one."""


def callers() -> list[str]:
    """The modules outside `_storage/` that name a store's gateway, relative to the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if not name.startswith("_storage/") and GATEWAY_CALL.search(path.read_text()):
            found.append(name)
    return found


def test_only_the_services_ask_a_stores_gateways() -> None:
    found = callers()
    others = [name for name in found if name not in SERVICES and not name.startswith(INGEST_SIDE)]
    assert others == [], f"ask the operations or processing service instead: {others}"
    assert len(found) <= AT_MOST, found


def test_the_search_finds_a_planted_call() -> None:
    assert GATEWAY_CALL.search("self.store.events.claim(connection, leased)")
    assert GATEWAY_CALL.search("return self._store.liveness.beat(me)")
    assert not GATEWAY_CALL.search("self.processing.claim(connection, leased)")
    assert not GATEWAY_CALL.search("store.eventsource")
