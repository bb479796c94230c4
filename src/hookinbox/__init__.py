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
from hookinbox._inbox import Inbox
from hookinbox._model import Event, Message, Status
from hookinbox._processing import HandlerContext, RetryPolicy, WorkerOptions
from hookinbox._receiver import Outcome, Reply
from hookinbox._storage import GroupCommit, StoreOptions

__version__ = "0.1.0"

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
