"""Webhook sources: how each provider signs a delivery and where its event id lives."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hookinbox.sources._base import Headers, Identity, Source, normalize_headers
from hookinbox.sources.generic import HMACSource
from hookinbox.sources.github import GitHub
from hookinbox.sources.mollie import Mollie, MollieClassic
from hookinbox.sources.shopify import Shopify
from hookinbox.sources.standard_webhooks import StandardWebhooks
from hookinbox.sources.stripe import Stripe

if TYPE_CHECKING:
    from hookinbox.sources._mollie_api import MollieAPI
    from hookinbox.sources._paypal_api import PayPalAPI
    from hookinbox.sources.paypal import PayPal

# Loaded on first use: they import cryptography and httpx, which would add about a quarter of
# a second to every process that imports hookinbox (the CLI, each server and worker process).
_LAZY = {
    "MollieAPI": "hookinbox.sources._mollie_api",
    "PayPal": "hookinbox.sources.paypal",
    "PayPalAPI": "hookinbox.sources._paypal_api",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "GitHub",
    "HMACSource",
    "Headers",
    "Identity",
    "Mollie",
    "MollieAPI",
    "MollieClassic",
    "PayPal",
    "PayPalAPI",
    "Shopify",
    "Source",
    "StandardWebhooks",
    "Stripe",
    "normalize_headers",
]
