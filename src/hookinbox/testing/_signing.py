"""`sign`: a delivery signed exactly as each provider signs it.

`sign(source, body)` reads what the configured source needs (its first secret, the URL a
provider signs, the header names an `HMACSource` was given) and builds the request the
provider would send: header names in the provider's casing, its id and timestamp headers, a
form body where the provider posts a form. Each provider's signer lives in its module of
`hookinbox.sources`, beside its verifier (`sources/_provider.py` says how they are written and
checked); this module chooses one by the source's class, and holds the signers a user adds
(`register_signer`) and the ones that need a test key pair the kit makes (PayPal's, SendGrid's:
`_paypal.py`, `_sendgrid.py`, loaded when first asked, as they need an extra).

Where a provider signs inside the body (a signature block, a timestamp in the signed body),
the signer returns the body it sends with the headers.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlencode

import hookinbox.sources
from hookinbox.sources import Source
from hookinbox.sources._provider import FORM, Provider, Signer, provider_of

Body = bytes | str | Mapping[str, Any] | list[Any]
SignerFunction = Signer
"""`(source, body, unix seconds, fields) -> headers`, or `(headers, body)` where the provider
signs inside the body; pops the fields it understands."""
T = TypeVar("T", bound=SignerFunction)

_SIGNERS: dict[type[Source], SignerFunction] = {}
_LAZY = {
    "hookinbox.sources._amazon_sns": "hookinbox.testing._amazon_sns",
    "hookinbox.sources._paypal": "hookinbox.testing._paypal",
    "hookinbox.sources._plaid": "hookinbox.testing._plaid",
    "hookinbox.sources._pubsub": "hookinbox.testing._pubsub",
    "hookinbox.sources._sendgrid": "hookinbox.testing._sendgrid",
}


def register_signer(source_class: type[Source]) -> Callable[[T], T]:
    """Sign deliveries for `source_class` (and its subclasses without a signer of their own)
    with the decorated `function(source, body, timestamp, fields) -> headers`."""

    def register(function: T) -> T:
        _SIGNERS[source_class] = function
        return function

    return register


def providers() -> list[Provider]:
    """Every provider of `hookinbox.sources.__all__`, in that order: the one list the tests,
    the simulator and the docs' table are derived from. Importing the classes loaded on use
    (PayPal, SendGrid) needs their extras."""
    found = []
    for name in hookinbox.sources.__all__:
        value = getattr(hookinbox.sources, name)
        declared = provider_of(value) if isinstance(value, type) else None
        if declared is not None:
            found.append(declared)
    return found


def signer_for(source: Source) -> SignerFunction:
    for cls in type(source).__mro__:
        if cls not in _SIGNERS and cls.__module__ in _LAZY:  # needs an extra: loaded on use
            importlib.import_module(_LAZY[cls.__module__])
        function = _SIGNERS.get(cls)
        if function is None and isinstance(cls, type) and issubclass(cls, Source):
            declared = provider_of(cls)
            function = declared.sign if declared is not None else None
        if function is not None:
            return function
    raise TypeError(
        f"no signer for {type(source).__name__}: register one with "
        "hookinbox.testing.register_signer"
    )


def sign(
    source: Source, body: Body, *, at: float | datetime | None = None, **fields: Any
) -> tuple[dict[str, str], bytes]:
    """The headers and body `source`'s provider would send for `body`, signed at `at`.

    `body` is bytes or text as sent, or a JSON value (a form where the provider posts forms).
    `at` is the signing time (a datetime or Unix seconds; default now). `fields` set what the
    provider puts in its headers (`event_id`, `topic`, `event`, `message_id`, ...: see
    docs/testing.md), and `secret=` signs with another secret than the source's first.
    """
    if not isinstance(source, Source):
        raise TypeError(f"sign() takes a configured source such as Stripe(...), not {source!r}")
    function = signer_for(source)
    raw = encode_body(source, body, fields)
    timestamp = _timestamp(at)
    remaining = dict(fields)
    signed = function(source, raw, timestamp, remaining)
    headers, raw = signed if isinstance(signed, tuple) else (signed, raw)
    if remaining:
        names = ", ".join(sorted(remaining))
        raise TypeError(f"sign() got fields {type(source).__name__} does not use: {names}")
    return headers, raw


def encode_body(source: Source, body: Body, fields: Mapping[str, Any]) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    if _posts_a_form(source) and fields.get("content_type", FORM) == FORM:
        if not isinstance(body, Mapping):
            raise TypeError("a form body is a mapping of field names to values")
        return urlencode(body, doseq=True).encode()
    return json.dumps(body).encode()


def _posts_a_form(source: Source) -> bool:
    for cls in type(source).__mro__:
        declared = provider_of(cls) if issubclass(cls, Source) else None
        if declared is not None:
            return declared.form
    return False


def _timestamp(at: float | datetime | None) -> int:
    if at is None:
        return int(time.time())
    if isinstance(at, datetime):
        return int(at.timestamp())
    return int(at)
