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

if TYPE_CHECKING:
    from hookinbox._inbox import Inbox
    from hookinbox._model import Event, Message, Status
    from hookinbox._processing import HandlerContext, RetryPolicy, WorkerOptions
    from hookinbox._receiver import Outcome, Reply
    from hookinbox._storage import GroupCommit, StoreOptions

__version__ = "0.1.0"

# Loaded on first use (PEP 562): `import hookinbox`, and so the `hookinbox` command's start-up
# and `--help`, does not pay for SQLAlchemy until an inbox is wanted. The errors above are
# plain classes and load at once.
_LAZY = {
    "Event": "hookinbox._model",
    "GroupCommit": "hookinbox._storage",
    "HandlerContext": "hookinbox._processing",
    "Inbox": "hookinbox._inbox",
    "Message": "hookinbox._model",
    "Outcome": "hookinbox._receiver",
    "Reply": "hookinbox._receiver",
    "RetryPolicy": "hookinbox._processing",
    "Status": "hookinbox._model",
    "StoreOptions": "hookinbox._storage",
    "WorkerOptions": "hookinbox._processing",
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
    "BadSignature",
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
    "Reply",
    "RetryPolicy",
    "Status",
    "StoreOptions",
    "StoreUnavailable",
    "TimestampOutOfTolerance",
    "UnknownSource",
    "VerificationError",
    "VerificationUnavailable",
    "WorkerOptions",
]
