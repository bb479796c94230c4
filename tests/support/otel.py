"""OpenTelemetry for tests, without the process-wide tracer provider.

The API lets a process set its tracer provider once, and a recording one would change what
every later test in that process stores (the receive span's `traceparent` among an event's
headers). So `recording()` hands hookinbox a tracer of a provider of its own for the length of
a block, exporting to memory (and to `also`), and lets it trace although no global provider is
set; and `forget_global_provider()` undoes what a docs
page that sets the global provider did.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler
from opentelemetry.util._once import Once

from hookinbox import _tracing


@contextmanager
def recording(
    also: SpanProcessor | None = None, sampler: Sampler | None = None
) -> Iterator[InMemorySpanExporter]:
    """hookinbox's spans are recorded and exported (to memory, and to `also`) in the block,
    sampled by `sampler` (the SDK's default: parent-based, always on at the root)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    if also is not None:
        provider.add_span_processor(also)
    _tracing._otel()  # loaded, so that what it sets at load is not set again below
    unconfigured = _tracing._UNCONFIGURED
    _tracing._UNCONFIGURED = ()  # no global provider is set: spans all the same
    api = _tracing._otel()
    assert api is not None, "the otel extra is part of the test install"
    saved = api.tracer
    api.tracer = provider.get_tracer("hookinbox")
    try:
        yield memory
    finally:
        api.tracer = saved
        _tracing._UNCONFIGURED = unconfigured
        provider.shutdown()


def forget_global_provider() -> None:
    """Back to no SDK configured, after a block that called `trace.set_tracer_provider`."""
    trace._TRACER_PROVIDER = None
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    _tracing._api = None  # its cached proxy tracer resolved to the provider just dropped


def by_name(spans: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    """Spans by name (a name seen twice fails: the tests expect one of each)."""
    named: dict[str, ReadableSpan] = {}
    for span in spans:
        assert span.name not in named, f"two spans named {span.name!r}"
        named[span.name] = span
    return named
