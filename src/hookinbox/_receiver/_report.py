"""What an answer leaves behind: its log line, its delivery metric, the end of its spans.

One line and one count per delivery, whatever answered it (a refusal before the body was read,
a verified delivery once stored, a 503 at the ack deadline); a write that ends after its 503
went out gets a line of its own (`log_late`), never a second count.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from hookinbox import _tracing as tracing
from hookinbox._logging import logger
from hookinbox._metrics import count_delivery
from hookinbox._model import NewDelivery
from hookinbox._receiver._reply import Reply

log = logger("hookinbox.ingest")


def report(
    source_name: str,
    reply: Reply,
    started: float,
    *,
    known: bool,
    delivery: NewDelivery | None = None,
    span: Any = None,
) -> Reply:
    """Log and count `reply`, end the delivery's span; `started` is its `perf_counter()`."""
    elapsed = time.perf_counter() - started
    log_reply(source_name, reply, elapsed, delivery)
    if span is not None:
        event_id = reply.body.get("event_id") or (delivery.event_id if delivery else None)
        tracing.end(
            span,
            {
                "http.response.status_code": reply.status_code,
                "messaging.message.id": event_id,
                "hookinbox.outcome": reply.outcome.value,
                "hookinbox.event.type": reply.event_type,
            },
            error=server_error(reply),
        )
    # An unknown source's name comes from the URL: never a metric label (cardinality).
    label = source_name if known else "unknown"
    count_delivery(
        label, reply.event_type, reply.outcome.value, elapsed, key_conflict=reply.key_conflict
    )
    return reply


def report_refusal(source_name: str, reply: Reply, elapsed: float, counted: float) -> Reply:
    """Log and count a refusal decided before verification (the body too large, too slow, no
    slot to verify it with its provider): `elapsed` for the line, `counted` for the metric."""
    log_reply(source_name, reply, elapsed)
    count_delivery(source_name, None, reply.outcome.value, counted, key_conflict=False)
    return reply


def log_reply(
    source_name: str, reply: Reply, elapsed: float, delivery: NewDelivery | None = None
) -> None:
    level = logging.INFO if reply.ok else logging.WARNING
    if not log.isEnabledFor(level):  # one line per delivery: built only when written
        return
    # A verified delivery names its event even when the answer does not (a 503).
    event_id = reply.body.get("event_id") or (delivery.event_id if delivery else None)
    event_type = reply.event_type or (delivery.event_type if delivery else None)
    fields = {
        "source": source_name,
        "event_id": event_id,
        "event_type": event_type,
        "outcome": reply.outcome.value,
        "status_code": reply.status_code,
        "latency_ms": round(elapsed * 1000, 2),
    }
    detail = reply.body.get("detail", "")
    log.log(
        level,
        "%s %s (%s): %s %d %.1f ms %s",
        source_name,
        event_id or "-",
        event_type or "-",
        reply.outcome.value,
        reply.status_code,
        elapsed * 1000,
        detail,
        extra=fields,
    )


def log_late(delivery: NewDelivery, reply: Reply) -> None:
    """The line of a delivery stored (or not) after its 503 went out at the ack deadline."""
    log.log(
        logging.INFO if reply.ok else logging.WARNING,
        "%s %s: %s %d after the ack deadline (answered 503 in time; a retry of an event "
        "stored now is answered as a duplicate)",
        delivery.source,
        delivery.event_id,
        reply.outcome.value,
        reply.status_code,
        extra={"source": delivery.source, "event_id": delivery.event_id, "late": True},
    )


def wall_ns(perf: float) -> int:
    """A `time.perf_counter()` reading as wall-clock nanoseconds (a span's start or end)."""
    return time.time_ns() - int((time.perf_counter() - perf) * 1e9)


def span_start(span: Any) -> int:
    """Where the `store` span will start (now), if there is a span to hang it on."""
    return 0 if span is None else time.time_ns()


def server_error(reply: Reply) -> str | None:
    """A span's error for a 5xx answer (a 4xx is the sender's mistake, not a failure here)."""
    return str(reply.status_code) if reply.status_code >= 500 else None
