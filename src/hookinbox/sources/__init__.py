"""Webhook sources: how each provider signs a delivery and where its event id lives."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hookinbox._errors import Handshake
from hookinbox._extras import importing
from hookinbox.sources._adyen import Adyen
from hookinbox.sources._asana import Asana
from hookinbox.sources._azure_event_grid import AzureEventGrid
from hookinbox.sources._azure_event_grid_cloudevents import AzureEventGridCloudEvents
from hookinbox.sources._base import BatchSource, Source
from hookinbox.sources._bitbucket import Bitbucket
from hookinbox.sources._box import Box
from hookinbox.sources._braintree import Braintree
from hookinbox.sources._calendly import Calendly
from hookinbox.sources._chargebee import Chargebee
from hookinbox.sources._checkout import CheckoutCom
from hookinbox.sources._coinbase_commerce import CoinbaseCommerce
from hookinbox.sources._customerio import CustomerIO
from hookinbox.sources._discord import Discord
from hookinbox.sources._docusign import DocuSign
from hookinbox.sources._dropbox import Dropbox
from hookinbox.sources._generic import HMACSource
from hookinbox.sources._github import GitHub
from hookinbox.sources._gitlab import GitLab, GitLabSigned
from hookinbox.sources._gocardless import GoCardless
from hookinbox.sources._handshakes import Query
from hookinbox.sources._hubspot import HubSpot
from hookinbox.sources._identity import Identity
from hookinbox.sources._intercom import Intercom
from hookinbox.sources._jira import Jira
from hookinbox.sources._lemonsqueezy import LemonSqueezy
from hookinbox.sources._linear import Linear
from hookinbox.sources._mailgun import Mailgun
from hookinbox.sources._meta import Meta
from hookinbox.sources._microsoft_graph import MicrosoftGraph
from hookinbox.sources._mollie import Mollie, MollieClassic
from hookinbox.sources._mux import Mux
from hookinbox.sources._netlify import Netlify
from hookinbox.sources._okta import Okta
from hookinbox.sources._openai import OpenAI
from hookinbox.sources._paddle import Paddle
from hookinbox.sources._pagerduty import PagerDuty
from hookinbox.sources._paystack import Paystack
from hookinbox.sources._postmark import Postmark
from hookinbox.sources._razorpay import Razorpay
from hookinbox.sources._replicate import Replicate
from hookinbox.sources._sentry import Sentry
from hookinbox.sources._shopify import Shopify
from hookinbox.sources._signatures import Headers
from hookinbox.sources._slack import Slack
from hookinbox.sources._square import Square
from hookinbox.sources._standard_webhooks import StandardWebhooks
from hookinbox.sources._stripe import Stripe
from hookinbox.sources._svix_apps import Clerk, Resend
from hookinbox.sources._telegram import Telegram
from hookinbox.sources._telnyx import Telnyx
from hookinbox.sources._trello import Trello
from hookinbox.sources._twilio import Twilio
from hookinbox.sources._twitch import Twitch
from hookinbox.sources._twitter import Twitter
from hookinbox.sources._typeform import Typeform
from hookinbox.sources._vercel import Vercel
from hookinbox.sources._webflow import Webflow
from hookinbox.sources._woocommerce import WooCommerce
from hookinbox.sources._workos import WorkOS
from hookinbox.sources._xero import Xero
from hookinbox.sources._zendesk import Zendesk
from hookinbox.sources._zoom import Zoom

if TYPE_CHECKING:
    from hookinbox.sources._amazon_sns import AmazonSNS
    from hookinbox.sources._microsoft_graph_rich import MicrosoftGraphRich
    from hookinbox.sources._mollie_api import MollieAPI
    from hookinbox.sources._paypal import PayPal
    from hookinbox.sources._paypal_api import PayPalAPI
    from hookinbox.sources._plaid import Plaid
    from hookinbox.sources._pubsub import GooglePubSub
    from hookinbox.sources._sendgrid import SendGrid

# Loaded on first use: they need cryptography and httpx, extras the core install does not have
# (and that would add about a quarter of a second to every process importing hookinbox).
# Without them, the import names the extra to install. (Discord and StandardWebhooks'
# public keys need cryptography too, imported when such a source is built: see _ed25519.py.)
_LAZY = {
    "AmazonSNS": ("hookinbox.sources._amazon_sns", "keys"),
    "GooglePubSub": ("hookinbox.sources._pubsub", "keys"),
    "MicrosoftGraphRich": ("hookinbox.sources._microsoft_graph_rich", "keys"),
    "MollieAPI": ("hookinbox.sources._mollie_api", "mollie"),
    "PayPal": ("hookinbox.sources._paypal", "paypal"),
    "PayPalAPI": ("hookinbox.sources._paypal_api", "paypal"),
    "Plaid": ("hookinbox.sources._plaid", "keys"),
    "SendGrid": ("hookinbox.sources._sendgrid", "crypto"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, extra = _LAZY[name]
        with importing(f"hookinbox.sources.{name}", extra):
            return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Adyen",
    "AmazonSNS",
    "Asana",
    "AzureEventGrid",
    "AzureEventGridCloudEvents",
    "BatchSource",
    "Bitbucket",
    "Box",
    "Braintree",
    "Calendly",
    "Chargebee",
    "CheckoutCom",
    "Clerk",
    "CoinbaseCommerce",
    "CustomerIO",
    "Discord",
    "DocuSign",
    "Dropbox",
    "GitHub",
    "GitLab",
    "GitLabSigned",
    "GoCardless",
    "GooglePubSub",
    "HMACSource",
    "Handshake",
    "Headers",
    "HubSpot",
    "Identity",
    "Intercom",
    "Jira",
    "LemonSqueezy",
    "Linear",
    "Mailgun",
    "Meta",
    "MicrosoftGraph",
    "MicrosoftGraphRich",
    "Mollie",
    "MollieAPI",
    "MollieClassic",
    "Mux",
    "Netlify",
    "Okta",
    "OpenAI",
    "Paddle",
    "PagerDuty",
    "PayPal",
    "PayPalAPI",
    "Paystack",
    "Plaid",
    "Postmark",
    "Query",
    "Razorpay",
    "Replicate",
    "Resend",
    "SendGrid",
    "Sentry",
    "Shopify",
    "Slack",
    "Source",
    "Square",
    "StandardWebhooks",
    "Stripe",
    "Telegram",
    "Telnyx",
    "Trello",
    "Twilio",
    "Twitch",
    "Twitter",
    "Typeform",
    "Vercel",
    "Webflow",
    "WooCommerce",
    "WorkOS",
    "Xero",
    "Zendesk",
    "Zoom",
]
