"""Processing: handlers, retry policies, the worker, and inline mode."""

from hookinbox.processing._business import BusinessKey
from hookinbox.processing._context import HandlerContext, Ordering
from hookinbox.processing._handlers import ANY_TYPE, Handler, HandlerRegistry, is_async_function
from hookinbox.processing._loop import LeaseLoop, WorkQueue
from hookinbox.processing._policy import DEFAULT_POLICY, RetryPolicy, Schedule
from hookinbox.processing._processor import Processor
from hookinbox.processing._worker import Worker, WorkerOptions

__all__ = [
    "ANY_TYPE",
    "DEFAULT_POLICY",
    "BusinessKey",
    "Handler",
    "HandlerContext",
    "HandlerRegistry",
    "LeaseLoop",
    "Ordering",
    "Processor",
    "RetryPolicy",
    "Schedule",
    "WorkQueue",
    "Worker",
    "WorkerOptions",
    "is_async_function",
]
