"""Webhook sources: how each provider signs a delivery and where its event id lives."""

from hookinbox.sources._base import Headers, Identity, Source, normalize_headers
from hookinbox.sources._mollie_api import MollieAPI
from hookinbox.sources._paypal_api import PayPalAPI
from hookinbox.sources.generic import HMACSource
from hookinbox.sources.github import GitHub
from hookinbox.sources.mollie import Mollie, MollieClassic
from hookinbox.sources.paypal import PayPal
from hookinbox.sources.shopify import Shopify
from hookinbox.sources.standard_webhooks import StandardWebhooks
from hookinbox.sources.stripe import Stripe

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
