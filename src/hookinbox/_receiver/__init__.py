"""Ingest, framework-neutral: the delivery pipeline, from a `Request` to its `Reply`.

One module per idea, in the order a delivery meets them:

- `_request.py`: `Request`, what an adapter hands over (method, source, headers, query, body);
- `_base.py`: `BaseReceiver`, the pipeline itself (`ahandle` on an event loop, `handle`
  blocking): find the source, read, verify, store, answer; handshakes for GET and HEAD;
- `_body.py`, `_deadlines.py`: the body read with the cap, within one deadline per loop;
- `_verify.py`, `_verified.py`: the source's verdict, and the `Verified` delivery it makes;
- `_sql.py`: `Receiver`, storing in the SQL database (group commit or a transaction of its
  own) and the answer its write earns;
- `_reply.py`, `_report.py`: the `Reply` and `Outcome`, and each answer's log line, metric and
  spans;
- `_anyio.py`: the steps that leave the loop (worker threads, another loop's deadlines).

The HTTP layer and the adapters use the two entries and the two types; nothing else.
"""

from hookinbox._receiver._base import BaseReceiver
from hookinbox._receiver._reply import INTERNAL_ERROR, Outcome, Reply, batch_reply
from hookinbox._receiver._request import Pipeline, Request, RequestHeaders
from hookinbox._receiver._sql import InlineProcessor, Receiver, Stored
from hookinbox._receiver._verified import Verified, event_of

__all__ = [
    "INTERNAL_ERROR",
    "BaseReceiver",
    "InlineProcessor",
    "Outcome",
    "Pipeline",
    "Receiver",
    "Reply",
    "Request",
    "RequestHeaders",
    "Stored",
    "Verified",
    "batch_reply",
    "event_of",
]
