"""hookinbox: webhook handling that is exactly-once in effect.

Verify each delivery on its raw bytes, store each event once and durably before answering 2xx,
then process it where the claim and the handler's own writes commit in one transaction.
"""

import importlib
from typing import TYPE_CHECKING, Any

from hookinbox._errors import (
    AckDeadlinePassed,
    BadSignature,
    BodyTooLarge,
    ConfigurationError,
    DeliveryIgnored,
    HookinboxError,
    MissingExtra,
    MissingHeader,
    NotReady,
    PayloadError,
    StoreUnavailable,
    TimestampOutOfTolerance,
    UnknownSource,
    VerificationError,
    VerificationUnavailable,
)
from hookinbox._version import __version__ as __version__

if TYPE_CHECKING:
    from hookinbox._inbox import BaseInbox, Inbox
    from hookinbox._model import Event, Message, Status
    from hookinbox._processing._async_worker import AsyncWorker
    from hookinbox._processing._context import AsyncHandlerContext, HandlerContext
    from hookinbox._processing._policy import RetryPolicy
    from hookinbox._processing._worker import Worker, WorkerOptions
    from hookinbox._receiver import Outcome, Reply
    from hookinbox._settings import ReceiverSettings, Settings
    from hookinbox._storage import GroupCommit, Store, StoreOptions

# Loaded on first use (PEP 562): `import hookinbox`, and so the `hookinbox` command's start-up
# and `--help`, does not pay for SQLAlchemy until an inbox is wanted. The errors above are
# plain classes and load at once.
_LAZY = {
    "AsyncHandlerContext": "hookinbox._processing._context",
    "AsyncWorker": "hookinbox._processing._async_worker",
    "BaseInbox": "hookinbox._inbox",
    "Event": "hookinbox._model",
    "GroupCommit": "hookinbox._storage",
    "HandlerContext": "hookinbox._processing._context",
    "Inbox": "hookinbox._inbox",
    "Message": "hookinbox._model",
    "Outcome": "hookinbox._receiver",
    "ReceiverSettings": "hookinbox._settings",
    "Reply": "hookinbox._receiver",
    "RetryPolicy": "hookinbox._processing._policy",
    "Settings": "hookinbox._settings",
    "Status": "hookinbox._model",
    "Store": "hookinbox._storage",
    "StoreOptions": "hookinbox._storage",
    "Worker": "hookinbox._processing._worker",
    "WorkerOptions": "hookinbox._processing._worker",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # the next look-up is a plain attribute
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AckDeadlinePassed",
    "AsyncHandlerContext",
    "AsyncWorker",
    "BadSignature",
    "BaseInbox",
    "BodyTooLarge",
    "ConfigurationError",
    "DeliveryIgnored",
    "Event",
    "GroupCommit",
    "HandlerContext",
    "HookinboxError",
    "Inbox",
    "Message",
    "MissingExtra",
    "MissingHeader",
    "NotReady",
    "Outcome",
    "PayloadError",
    "ReceiverSettings",
    "Reply",
    "RetryPolicy",
    "Settings",
    "Status",
    "Store",
    "StoreOptions",
    "StoreUnavailable",
    "TimestampOutOfTolerance",
    "UnknownSource",
    "VerificationError",
    "VerificationUnavailable",
    "Worker",
    "WorkerOptions",
]
