"""Processing: handlers, retry policies, the worker, and inline mode."""

from hookinbox._processing._business import BusinessKey
from hookinbox._processing._context import HandlerContext, Ordering
from hookinbox._processing._handlers import ANY_TYPE, Handler, HandlerRegistry, is_async_function
from hookinbox._processing._loop import LeaseLoop, WorkQueue
from hookinbox._processing._policy import DEFAULT_POLICY, RetryPolicy, Schedule
from hookinbox._processing._processor import Processor
from hookinbox._processing._worker import Worker, WorkerOptions

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
