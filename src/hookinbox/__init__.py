"""hookinbox: webhook handling that is exactly-once in effect.

Verify each delivery on its raw bytes, store each event once and durably before answering 2xx,
then process it where the claim and the handler's own writes commit in one transaction.
"""

from hookinbox._errors import (
    AckDeadlinePassed,
    BadSignature,
    BodyTooLarge,
    ConfigurationError,
    DeliveryIgnored,
    HookinboxError,
    MissingHeader,
    NotReady,
    PayloadError,
    StoreUnavailable,
    TimestampOutOfTolerance,
    UnknownSource,
    VerificationError,
    VerificationUnavailable,
)
from hookinbox._inbox import BaseInbox, Inbox
from hookinbox._model import Event, Message, Status
from hookinbox._processing._context import HandlerContext
from hookinbox._processing._policy import RetryPolicy
from hookinbox._processing._worker import Worker, WorkerOptions
from hookinbox._receiver import Outcome, Reply
from hookinbox._settings import ReceiverSettings, Settings
from hookinbox._storage._engine import StoreOptions
from hookinbox._storage._group_commit import GroupCommit
from hookinbox._storage._store import Store

__version__ = "0.1.0"

__all__ = [
    "AckDeadlinePassed",
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
