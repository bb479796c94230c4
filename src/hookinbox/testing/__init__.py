"""Test your own handlers: deliveries signed like the providers', realistic events, a pytest
plugin (`pytest_plugins = ["hookinbox.testing.pytest"]`), an exactly-once check, and fakes of
Stripe's, GitHub's and Square's APIs on loopback, for reconcile.

Nothing here needs pytest (only the plugin module imports it) or another dependency of its
own; PayPal's test certificate needs the `paypal` extra, as the PayPal source does, and the
Ed25519 test key (Discord, Standard Webhooks `v1a`) and SendGrid's test key the `crypto` extra.
See docs/testing.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hookinbox._extras import importing
from hookinbox.testing._asgi import Answer
from hookinbox.testing._check import (
    ExactlyOnceReport,
    ExactlyOnceViolation,
    WorkerStuck,
    check_exactly_once,
)
from hookinbox.testing._clock import Clock
from hookinbox.testing._events import (
    github_hook_delivery,
    github_push,
    shopify_order,
    square_event,
    standard_event,
    stripe_checkout_session,
    stripe_event,
    stripe_invoice,
    stripe_subscription,
)
from hookinbox.testing._github_api import FakeGitHubAPI
from hookinbox.testing._harness import InboxHarness
from hookinbox.testing._signing import register_signer, sign
from hookinbox.testing._square_api import FakeSquareAPI
from hookinbox.testing._stripe_api import FakeStripeAPI

if TYPE_CHECKING:
    from hookinbox.testing._amazon_sns import SNSTestCertificate, sns_test_certificate
    from hookinbox.testing._ed25519 import Ed25519TestKey, ed25519_test_key
    from hookinbox.testing._paypal import PayPalTestCertificate, paypal_test_certificate
    from hookinbox.testing._sendgrid import SendGridTestKey, sendgrid_test_key

_LAZY = {
    "Ed25519TestKey": ("hookinbox.testing._ed25519", "crypto"),
    "ed25519_test_key": ("hookinbox.testing._ed25519", "crypto"),
    "PayPalTestCertificate": ("hookinbox.testing._paypal", "paypal"),
    "paypal_test_certificate": ("hookinbox.testing._paypal", "paypal"),
    "SendGridTestKey": ("hookinbox.testing._sendgrid", "crypto"),
    "sendgrid_test_key": ("hookinbox.testing._sendgrid", "crypto"),
    "SNSTestCertificate": ("hookinbox.testing._amazon_sns", "keys"),
    "sns_test_certificate": ("hookinbox.testing._amazon_sns", "keys"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, extra = _LAZY[name]
        with importing(f"hookinbox.testing.{name}", extra):
            return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Answer",
    "Clock",
    "Ed25519TestKey",
    "ExactlyOnceReport",
    "ExactlyOnceViolation",
    "FakeGitHubAPI",
    "FakeSquareAPI",
    "FakeStripeAPI",
    "InboxHarness",
    "PayPalTestCertificate",
    "SNSTestCertificate",
    "SendGridTestKey",
    "WorkerStuck",
    "check_exactly_once",
    "ed25519_test_key",
    "github_hook_delivery",
    "github_push",
    "paypal_test_certificate",
    "register_signer",
    "sendgrid_test_key",
    "shopify_order",
    "sign",
    "sns_test_certificate",
    "square_event",
    "standard_event",
    "stripe_checkout_session",
    "stripe_event",
    "stripe_invoice",
    "stripe_subscription",
]
