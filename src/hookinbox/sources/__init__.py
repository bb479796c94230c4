"""Webhook sources: how each provider signs a delivery and where its event id lives."""

from hookinbox.sources._base import Headers, Identity, Source, normalize_headers
from hookinbox.sources.generic import HMACSource
from hookinbox.sources.github import GitHub
from hookinbox.sources.gitlab import GitLab, GitLabSigned
from hookinbox.sources.lemonsqueezy import LemonSqueezy
from hookinbox.sources.paddle import Paddle
from hookinbox.sources.shopify import Shopify
from hookinbox.sources.slack import Slack
from hookinbox.sources.square import Square
from hookinbox.sources.standard_webhooks import StandardWebhooks
from hookinbox.sources.stripe import Stripe
from hookinbox.sources.twilio import Twilio

__all__ = [
    "GitHub",
    "GitLab",
    "GitLabSigned",
    "HMACSource",
    "Headers",
    "Identity",
    "LemonSqueezy",
    "Paddle",
    "Shopify",
    "Slack",
    "Source",
    "Square",
    "StandardWebhooks",
    "Stripe",
    "Twilio",
    "normalize_headers",
]
