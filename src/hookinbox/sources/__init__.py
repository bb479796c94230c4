"""Webhook sources: how each provider signs a delivery and where its event id lives."""

from hookinbox.sources._base import Headers, Identity, Source, normalize_headers
from hookinbox.sources.generic import HMACSource
from hookinbox.sources.github import GitHub
from hookinbox.sources.shopify import Shopify
from hookinbox.sources.standard_webhooks import StandardWebhooks
from hookinbox.sources.stripe import Stripe

__all__ = [
    "GitHub",
    "HMACSource",
    "Headers",
    "Identity",
    "Shopify",
    "Source",
    "StandardWebhooks",
    "Stripe",
    "normalize_headers",
]
