"""The public surface is drawn: these modules and names, each documented in docs/api.md.

A change to a list below is a change to the public API: it goes with a docs change and, when
it removes or renames something, a deprecation (docs/api.md#deprecations).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import time
from datetime import timedelta
from pathlib import Path

import pytest

import hookinbox
from hookinbox.testing._signing import providers

ROOT = Path(__file__).resolve().parents[1]
API_PAGE = ROOT / "docs" / "api.md"

PUBLIC: dict[str, list[str]] = {
    "hookinbox": [
        "AckDeadlinePassed",
        "AsyncHandlerContext",
        "AsyncWorker",
        "BadSignature",
        "BaseInbox",
        "BodyTooLarge",
        "ConfigurationError",
        "DeliveryIgnored",
        "Event",
        "GroupCommit",
        "HandlerContext",
        "HookinboxError",
        "Inbox",
        "Message",
        "MissingExtra",
        "MissingHeader",
        "NotReady",
        "Outcome",
        "PayloadError",
        "ReceiverSettings",
        "Reply",
        "RetryPolicy",
        "Settings",
        "Status",
        "Store",
        "StoreOptions",
        "StoreUnavailable",
        "TimestampOutOfTolerance",
        "UnknownSource",
        "VerificationError",
        "VerificationUnavailable",
        "Worker",
        "WorkerOptions",
    ],
    # The base classes and helpers, and every provider class the sources declare (below).
    "hookinbox.sources": [
        "BatchSource",
        "HMACSource",
        "Handshake",
        "Headers",
        "Identity",
        "MollieAPI",
        "PayPalAPI",
        "Query",
        "Source",
    ],
    "hookinbox.outbox": [
        "CallableDestination",
        "DeliveryError",
        "Destination",
        "HTTPDestination",
        "JetStreamDestination",
        "RabbitMQDestination",
        "Undeliverable",
    ],
    "hookinbox.http": ["Request", "answer_get", "health_probes", "receive_asgi", "receive_stream"],
    "hookinbox.brokers": [
        "BrokerSource",
        "BrokerUnavailable",
        "JetStreamConsumer",
        "RabbitMQConsumer",
    ],
    "hookinbox.claims": [
        "AlreadyDone",
        "AsyncRedisClaims",
        "Claim",
        "ClaimContext",
        "ClaimInbox",
        "ClaimState",
        "ClaimStoreUnavailable",
        "ClaimTaken",
        "InProgress",
        "RedisClaims",
    ],
    "hookinbox.fastapi": ["handshake", "receive", "respond", "router"],
    "hookinbox.flask": ["blueprint", "handshake", "receive", "respond"],
    "hookinbox.django": ["DjangoInbox", "DjangoStore", "TransactionBroken", "webhook_view"],
    "hookinbox.dashboard": ["dashboard_app"],
    "hookinbox.simulate": [
        "Latency",
        "Plan",
        "PlannedDelivery",
        "SimulationConfig",
        "SimulationReport",
        "TargetUnreachable",
        "Verification",
        "build_plan",
        "run_simulation",
        "simulate",
        "verify",
        "wait_until_drained",
    ],
    "hookinbox.cli": ["main"],
    "hookinbox.testing": [
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
    ],
}

# A provider's class is public as its module declares it (sources/_provider.py): named once in
# hookinbox.sources.__all__ and documented in docs/api.md, checked below like every other name.
PUBLIC["hookinbox.sources"] = sorted(
    {*PUBLIC["hookinbox.sources"], *(declared.source.__name__ for declared in providers())}
)

CONVENTIONAL = re.compile(
    r"^hookinbox\.(__main__|examples(\..*)?|django\.(apps|checks|urls|views|migrations(\..*)?"
    r"|management(\..*)?)|testing\.pytest)$"
)
"""Modules whose names other tools fix (Django's apps, urls, views, checks, migrations and
management commands; `python -m hookinbox`; the pytest plugin `hookinbox.testing.pytest`,
named in `pytest_plugins`), and the examples, which are code to copy."""


def _import(name: str) -> object:
    return importlib.import_module(name)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_public_module_exports_exactly_its_names(name: str) -> None:
    module = _import(name)
    exported = getattr(module, "__all__", None)
    assert exported == PUBLIC[name], f"{name}.__all__ changed: update PUBLIC and docs/api.md"
    for attribute in exported:
        assert getattr(module, attribute) is not None


def test_every_other_module_is_private() -> None:
    """A module is public (listed above), conventional, or has an underscore in its path."""
    found = [hookinbox.__name__]
    for info in pkgutil.walk_packages(hookinbox.__path__, "hookinbox."):
        found.append(info.name)
    stray = [
        name
        for name in found
        if name not in PUBLIC
        and not CONVENTIONAL.match(name)
        and not any(part.startswith("_") for part in name.split(".")[1:])
    ]
    assert stray == [], "public-looking modules that docs/api.md does not list"


def test_docs_api_lists_every_public_name_and_no_other() -> None:
    """docs/api.md has a section per public module, naming each export once, in backticks."""
    text = API_PAGE.read_text()
    sections = dict(re.findall(r"^## `([\w.]+)`\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL))
    assert sorted(sections) == sorted(PUBLIC)
    for module, names in PUBLIC.items():
        listed = re.findall(r"^\| `(\w+)`", sections[module], re.MULTILINE)
        assert sorted(listed) == sorted(names), f"docs/api.md, section {module}"


def test_the_documented_entry_points_exist() -> None:
    from hookinbox import Inbox, NotReady
    from hookinbox.sources import GitHub, HMACSource, Shopify, StandardWebhooks, Stripe

    inbox = Inbox(
        "sqlite:///never-opened.db",
        sources=[Stripe(secret="whsec_x"), Shopify(secret="x")],
    )
    for source in (
        GitHub(secret="x"),
        StandardWebhooks(secret="whsec_eHh4eA=="),
        HMACSource(name="acme", secret="x", signature_header="X-Acme-Signature"),
    ):
        inbox.add_source(source)
    assert sorted(inbox.sources) == ["acme", "github", "shopify", "standard", "stripe"]
    assert issubclass(NotReady, hookinbox.HookinboxError)


def test_every_error_derives_from_the_root() -> None:
    errors = [getattr(hookinbox, name) for name in hookinbox.__all__ if name.endswith("Error")]
    errors += [hookinbox.MissingHeader, hookinbox.BadSignature, hookinbox.NotReady]
    for error in errors:
        assert issubclass(error, hookinbox.HookinboxError)
        assert str(error()) == (error.__doc__ or "").strip().splitlines()[0]


SIGNATURE = re.compile(r"^```text\n(?P<name>\w+)\((?P<parameters>.*?)\)\n```$", re.M | re.S)
"""A class's signature as docs/api.md writes it: a ```text block `Name(...)`."""
SIGNED = ["Inbox", "RetryPolicy", "StoreOptions", "GroupCommit", "WorkerOptions"]


def _written_signatures() -> dict[str, str]:
    return {
        match["name"]: match["parameters"] for match in SIGNATURE.finditer(API_PAGE.read_text())
    }


def _differences(name: str, written: str) -> list[str]:
    """How a written parameter list differs from the class's own: names, order, keyword-only
    or not, annotations (as written in the code) and defaults (the written expression's value)."""
    arguments = ast.parse(f"def _({written}): pass").body[0].args  # type: ignore[attr-defined]
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + arguments.defaults
    shown = [
        (arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default)
        for arg, default in zip(positional, defaults, strict=True)
    ] + [
        (arg, inspect.Parameter.KEYWORD_ONLY, default)
        for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    ]
    names = {"timedelta": timedelta, "time": time}
    actual = list(inspect.signature(getattr(hookinbox, name)).parameters.values())
    found = []
    if [arg.arg for arg, _, _ in shown] != [parameter.name for parameter in actual]:
        found.append(f"{name}: parameters {[arg.arg for arg, _, _ in shown]}")
    for (arg, kind, default), parameter in zip(shown, actual, strict=False):
        annotation = ast.unparse(ast.parse(str(parameter.annotation)))
        if arg.annotation is None or ast.unparse(arg.annotation) != annotation:
            found.append(f"{name}.{arg.arg}: annotation, the code has {annotation}")
        if kind is not parameter.kind:
            found.append(f"{name}.{arg.arg}: {parameter.kind.description} in the code")
        value = inspect.Parameter.empty if default is None else eval(ast.unparse(default), names)
        if value != parameter.default:
            found.append(f"{name}.{arg.arg}: default, the code has {parameter.default!r}")
    return found


def test_docs_api_writes_each_main_class_s_signature_as_the_code_has_it() -> None:
    """docs/api.md shows `Inbox(...)` first, then the options' classes, each parameter with its
    annotation and default; a change to a constructor fails here until the page follows."""
    written = _written_signatures()
    assert list(written) == SIGNED
    for name, parameters in written.items():
        assert _differences(name, parameters) == []


def test_the_signature_check_sees_a_drift() -> None:
    inbox = _written_signatures()["Inbox"]
    assert _differences(
        "Inbox", inbox.replace("body_timeout: float = 10.0", "body_timeout: float = 9.0")
    )
    assert _differences("Inbox", inbox.replace("    *,\n", ""))  # keyword-only no more
    assert _differences("Inbox", inbox.replace("    clock: Callable[[], float] = time.time,\n", ""))
    assert _differences("Inbox", inbox.replace("ack_deadline: float | None", "ack_deadline: float"))
