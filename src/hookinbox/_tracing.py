"""OpenTelemetry spans, when the API is installed (the `otel` extra): a leaf, like `_metrics`.

hookinbox depends on `opentelemetry-api` only. An application that configures an SDK (a tracer
provider and an exporter) gets the spans below; one that installs the API without configuring
it gets no spans at all (hookinbox looks for a provider before each span); one without the API
pays one `find_spec` and nothing is imported. Nothing here is imported by `import hookinbox`: the
receiver, processor and relay call these functions, which load the API on first use.

The trace of one event: `receive {source}` (with `verify` and `store`) answers the provider; it
is started once verification has decided (at the time the request arrived), so that a request's
own `traceparent` is its parent only when the delivery verified, a link otherwise. Its
context is stored with the event (as a `traceparent` entry among the stored headers), so the
worker's `process {source}` span, a later and separate operation, is its child and links to it
(with `claim` and one span per handler); an outbox message keeps the context of the handler
that sent it, and the relay's `send {destination}` span continues it, passing `traceparent` on
to HTTP destinations. Attribute names follow the semantic conventions (messaging, HTTP, db).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

from hookinbox._extras import installed

SYSTEM = "hookinbox"
"""`messaging.system`: webhooks are messages from the provider; hookinbox is the system."""
TRACEPARENT = "traceparent"

_api: SimpleNamespace | bool | None = None
_UNCONFIGURED: tuple[type, ...] = ()
"""The API's tracer providers that record nothing (set once the API is loaded)."""
_ASK = object()
_PROVIDER_FROM_ENVIRONMENT = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
"""A provider named in the environment is loaded by the API on first use: ask it then."""


def _otel() -> SimpleNamespace | None:
    """The API's modules, loaded once; None when it is not installed."""
    global _api
    if _api is None:
        if not installed("opentelemetry"):
            _api = False
        else:
            try:
                from opentelemetry import context, propagate, trace
            except ImportError:  # another distribution's `opentelemetry` namespace only
                _api = False
            else:
                from hookinbox._version import __version__

                global _UNCONFIGURED
                _UNCONFIGURED = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
                tracer = trace.get_tracer("hookinbox", __version__)
                _api = SimpleNamespace(context=context, propagate=propagate, trace=trace,
                                       tracer=tracer)  # fmt: skip
    if not isinstance(_api, SimpleNamespace):
        return None
    # Until an application sets a tracer provider (an SDK), every span is non-recording: skip
    # them whole (a few microseconds each, several per event). Asked on every call, so a
    # provider set later is honoured from the next span on. The API's own question reads the
    # environment each time no provider is set (about 1.5 us, 4 % of a delivery's CPU on the
    # event loop), so its global is read first; where the API lacks it, the API is asked.
    provider = getattr(_api.trace, "_TRACER_PROVIDER", _ASK)
    if provider is None and _UNCONFIGURED and not _PROVIDER_FROM_ENVIRONMENT:
        return None
    if isinstance(_api.trace.get_tracer_provider(), _UNCONFIGURED):
        return None
    return _api


def enabled() -> bool:
    return _otel() is not None


def _kind(otel: SimpleNamespace, name: str) -> Any:
    return getattr(otel.trace.SpanKind, name.upper())


def _extract(otel: SimpleNamespace, carrier: Mapping[str, str] | None) -> Any:
    return otel.propagate.extract(dict(carrier or {}))


# -- spans with an explicit parent (ingest: verify and store may run in other threads) -----


def start_receive(
    source: str,
    headers: Mapping[str, str],
    size: int,
    *,
    verified: bool = False,
    start_time: int | None = None,
) -> Any | None:
    """The span of one delivery (started at `start_time`, ns, or now).

    A `traceparent` the request carried is chosen by whoever sent it: it becomes the parent
    only once the delivery `verified` (the provider's own, or a gateway's in front of it), and
    until then only a link, so that a forged request neither writes spans into a trace id it
    picked nor turns recording on through a parent-based sampler. Either way the sender's
    `tracestate` (vendor data: host names, tenant ids) is dropped, never stored with the event
    nor sent on to a destination, and so is its baggage."""
    otel = _otel()
    if otel is None:
        return None
    trace = otel.trace
    remote = trace.get_current_span(_extract(otel, headers)).get_span_context()
    links = []
    parent = otel.context.Context()  # a trace of its own, whatever is current
    if remote.is_valid:
        context = trace.SpanContext(
            remote.trace_id, remote.span_id, is_remote=True, trace_flags=remote.trace_flags
        )  # the same span, without its tracestate
        if verified:
            parent = trace.set_span_in_context(trace.NonRecordingSpan(context), parent)
        else:
            links.append(trace.Link(context))
    return otel.tracer.start_span(
        f"receive {source}",
        context=parent,
        kind=_kind(otel, "server"),
        attributes={
            "messaging.system": SYSTEM,
            "messaging.operation.type": "receive",
            "messaging.operation.name": "receive",
            "messaging.destination.name": source,
            "messaging.message.body.size": size,
            "http.request.method": "POST",
        },
        links=links,
        start_time=start_time,
    )


def start_child(
    parent: Any | None,
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    kind: str = "internal",
    start_time: int | None = None,
) -> Any | None:
    """A child of `parent` (a span from `start_receive`), or None when there is no parent."""
    if parent is None:  # first: no parent is the common case, and the cheaper question
        return None
    otel = _otel()
    if otel is None:
        return None
    return otel.tracer.start_span(
        name,
        context=otel.trace.set_span_in_context(parent),
        kind=_kind(otel, kind),
        attributes=dict(attributes or {}),
        start_time=start_time,
    )


def end(
    span: Any | None,
    attributes: Mapping[str, Any] | None = None,
    *,
    error: str | None = None,
    end_time: int | None = None,
) -> None:
    """Set `attributes` (None values skipped) and end `span` (at `end_time`, ns, or now);
    `error` marks it failed."""
    if span is None:
        return
    if span.is_recording():
        for name, value in (attributes or {}).items():
            if value is not None:
                span.set_attribute(name, value)
        if error is not None:
            otel = _otel()
            assert otel is not None
            span.set_attribute("error.type", error)
            span.set_status(otel.trace.Status(otel.trace.StatusCode.ERROR, error))
    span.end(end_time=end_time)


def annotate(span: Any | None, attributes: Mapping[str, Any], *, error: str | None = None) -> None:
    """Set attributes on a span still open (ended by its `with` block)."""
    if span is None or not span.is_recording():
        return
    span.set_attributes(dict(attributes))
    if error is not None:
        otel = _otel()
        assert otel is not None
        span.set_attribute("error.type", error)
        span.set_status(otel.trace.Status(otel.trace.StatusCode.ERROR, error))


def carrier_of(span: Any | None) -> dict[str, str]:
    """`traceparent` (and `tracestate`) of a recording span, to store; {} otherwise."""
    if span is None:
        return {}
    otel = _otel()
    if otel is None or not span.is_recording():
        return {}
    carrier: dict[str, str] = {}
    otel.propagate.inject(carrier, context=otel.trace.set_span_in_context(span))
    return carrier


# -- spans as the current span (processing and sending run in one thread) -----------------


def current_carrier() -> str | None:
    """The current span's context as JSON (for an outbox row), or None when not recording."""
    otel = _otel()
    if otel is None or not otel.trace.get_current_span().is_recording():
        return None
    carrier: dict[str, str] = {}
    otel.propagate.inject(carrier)
    return json.dumps(carrier, sort_keys=True) if carrier else None


@contextmanager
def consuming(
    name: str,
    stored: Mapping[str, str] | str | None,
    attributes: Mapping[str, Any],
    *,
    kind: str = "consumer",
) -> Iterator[Any | None]:
    """A span that continues a stored context, current while the block runs.

    Its parent is the stored context (one trace from the provider's request on), and it links
    to it too: processing is a later operation than the delivery, which is what a link says to
    tools that draw one trace per request.
    """
    otel = _otel()
    if otel is None:
        yield None
        return
    carrier: Mapping[str, str] = json.loads(stored) if isinstance(stored, str) else stored or {}
    parent = _extract(otel, carrier) if carrier else None
    links = []
    if parent is not None:
        context = otel.trace.get_current_span(parent).get_span_context()
        if context.is_valid:
            links.append(otel.trace.Link(context))
    with otel.tracer.start_as_current_span(
        name,
        context=parent,
        kind=_kind(otel, kind),
        links=links,
        attributes=dict(attributes),
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


@contextmanager
def step(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any | None]:
    """A child of the current span (claim, each handler), current while the block runs.

    An exception leaving the block is recorded on the span and marks it failed, then raised.
    """
    otel = _otel()
    if otel is None or not otel.trace.get_current_span().is_recording():
        yield None
        return
    with otel.tracer.start_as_current_span(name, attributes=dict(attributes or {})) as span:
        yield span


def annotate_current(attributes: Mapping[str, Any]) -> None:
    """Set attributes on the current span (an HTTP destination's, on the relay's `send`)."""
    otel = _otel()
    if otel is not None:
        annotate(otel.trace.get_current_span(), attributes)


def inject_current(headers: dict[str, str]) -> None:
    """Add the current context's `traceparent` to outgoing HTTP headers."""
    otel = _otel()
    if otel is not None and otel.trace.get_current_span().get_span_context().is_valid:
        otel.propagate.inject(headers)
