"""Mistakes are caught when the application starts, not when its first events arrive.

Each case is a mistake an application made with 0.1 that imported, migrated and served
cleanly, then failed on its events (`unhandled/no_handler`, retried `TypeError`s, a handler run
twice). Now each is a `ConfigurationError` of one line, at construction, at registration, or
when the inbox starts; the command line shows it as one line and exits 2.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hookinbox import ConfigurationError, Event, HandlerContext, Inbox, RetryPolicy, Status
from hookinbox._settings import Overrides, overriding
from hookinbox.sources import Stripe
from tests.support.asgi import ASGIClient
from tests.support.server import run_cli
from tests.support.signing import stripe_delivery, stripe_event

SECRET = "whsec_test_configuration"


@pytest.fixture
def inbox(tmp_path: Path) -> Iterator[Inbox]:
    inbox = Inbox(f"sqlite:///{tmp_path / 'inbox.db'}", sources=[Stripe(secret=SECRET)])
    yield inbox
    inbox.close()


def on_checkout(event: Event, ctx: HandlerContext) -> None:
    pass


# -- registration ----------------------------------------------------------------------------


def test_the_decorator_without_its_arguments_is_refused(inbox: Inbox) -> None:
    with pytest.raises(ConfigurationError, match=r"needs the source name: write @inbox.handler"):
        inbox.handler(on_checkout)  # type: ignore[arg-type]  # as `@inbox.handler` does


def test_a_handler_that_is_not_callable_is_refused(inbox: Inbox) -> None:
    with pytest.raises(ConfigurationError, match="must be a function taking"):
        inbox.handler("stripe")("on_checkout")


@pytest.mark.parametrize(
    "function",
    [
        lambda event: None,
        lambda: None,
        lambda event, ctx, extra: None,
        lambda *, event, ctx: None,
    ],
    ids=["one argument", "none", "three", "keyword-only"],
)
def test_a_handler_that_cannot_take_event_and_ctx_is_refused(inbox: Inbox, function: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"must accept two arguments, \(event, ctx\)"):
        inbox.handler("stripe", "checkout.session.completed")(function)


class Callable:
    def __call__(self, event: Event, ctx: HandlerContext) -> None:
        pass

    def method(self, event: Event, ctx: HandlerContext) -> None:
        pass


async def async_handler(event: Event, ctx: HandlerContext) -> None:
    pass


@pytest.mark.parametrize(
    "function",
    [
        on_checkout,
        async_handler,
        Callable(),
        Callable().method,
        functools.partial(lambda tag, event, ctx: None, "tag"),
        lambda event, ctx, extra=1: None,
        lambda *args: None,
    ],
    ids=["function", "async", "callable object", "method", "partial", "default", "varargs"],
)
def test_anything_callable_as_event_ctx_is_accepted(inbox: Inbox, function: Any) -> None:
    inbox.handler("stripe", "checkout.session.completed")(function)
    inbox.check()


def test_the_same_function_twice_for_the_same_events_is_refused(inbox: Inbox) -> None:
    inbox.handler("stripe", "checkout.session.completed")(on_checkout)
    with pytest.raises(ConfigurationError, match="would run twice for one event"):
        inbox.handler("stripe", "checkout.session.completed")(on_checkout)
    with pytest.raises(ConfigurationError, match="would run twice for one event"):
        inbox.handler("stripe")(on_checkout)  # '*' covers checkout.session.completed too
    shared = Callable()
    inbox.handler("stripe", "invoice.paid")(shared.method)
    with pytest.raises(ConfigurationError, match="would run twice for one event"):
        inbox.handler("stripe", "invoice.paid")(shared.method)  # a new bound method each time


def test_one_function_for_several_types_is_fine(inbox: Inbox) -> None:
    @inbox.handler("stripe", "invoice.paid")
    @inbox.handler("stripe", "invoice.payment_failed")
    def on_invoice(event: Event, ctx: HandlerContext) -> None:
        pass

    inbox.check()


def test_a_misspelt_source_is_refused_at_start_with_a_hint(inbox: Inbox) -> None:
    @inbox.handler("strpe", "checkout.session.completed")  # registering is fine: sources may
    def on_typo(event: Event, ctx: HandlerContext) -> None:  # be added after their handlers
        pass

    expected = (
        "handler test_a_misspelt_source_is_refused_at_start_with_a_hint.<locals>.on_typo is for "
        "source 'strpe', which this inbox does not have (did you mean 'stripe'?); its sources: "
        "stripe"
    )
    for start in (inbox.check, inbox.migrate, inbox.process_due):
        with pytest.raises(ConfigurationError) as refused:
            start()
        assert str(refused.value) == expected
    headers, body = stripe_delivery(stripe_event("evt_1"), SECRET)
    with pytest.raises(ConfigurationError, match="did you mean 'stripe'"):
        inbox.receive("stripe", headers, body)
    client = ASGIClient(inbox.asgi())  # mounted in an app of your own: a 500, and one log line
    answer = client.post("/webhooks/stripe", headers=headers, content=body)
    assert (answer.status_code, answer.json()) == (500, {"status": "error", "error": "internal"})


def test_after_start_a_handler_for_a_missing_source_is_refused_at_once(inbox: Inbox) -> None:
    headers, body = stripe_delivery(stripe_event("evt_1"), SECRET)
    assert inbox.receive("stripe", headers, body).status_code == 200  # the inbox has started
    with pytest.raises(ConfigurationError, match="did you mean 'shopify'"):
        inbox.handler("shopfy", "orders/create")(on_checkout)
    with pytest.raises(ConfigurationError, match="configure the inbox before it is first used"):
        inbox.add_source(Stripe(secret=SECRET, name="connect"))


def test_a_source_and_a_destination_must_be_the_right_kind(inbox: Inbox) -> None:
    with pytest.raises(ConfigurationError, match=r"add_source takes a source such as Stripe"):
        inbox.add_source("stripe")  # type: ignore[type-var]
    with pytest.raises(ConfigurationError, match="add_destination takes a destination"):
        inbox.add_destination(on_checkout)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="already added"):
        inbox.add_source(Stripe(secret="whsec_other"))


def test_a_correct_configuration_still_processes(inbox: Inbox) -> None:
    seen: list[str] = []

    @inbox.handler("stripe", "checkout.session.completed")
    def record(event: Event, ctx: HandlerContext) -> None:
        seen.append(event.id)

    headers, body = stripe_delivery(stripe_event("evt_ok"), SECRET)
    assert inbox.receive("stripe", headers, body).body["status"] == "accepted"
    inbox.process_due()
    assert seen == ["evt_ok"]
    assert inbox.store.get_event("stripe", "evt_ok").status is Status.PROCESSED


# -- settings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"max_body_size": "1mb"}, "max_body_size must be a whole number from 1"),
        ({"retry_after": 0}, "retry_after must be a whole number from 1 to 3600, not 0"),
        (
            {"ack_deadline": 90},
            "ack_deadline must be more than 0 and at most 60 seconds (or None), not 90",
        ),
        ({"body_timeout": 0}, "body_timeout must be more than 0 and at most 300 seconds, not 0"),
        ({"prune_at": "4am"}, "not a time of day: '4am' (use HH:MM, UTC)"),
        ({"retention": timedelta(0)}, "retention must be a positive timedelta"),
        ({"group_commit": "yes"}, "group_commit is True, False or a GroupCommit, not 'yes'"),
        ({"retry": 3}, "retry must be a RetryPolicy"),
        ({"database_url": "mssql://db/shop"}, "unsupported database 'mssql'"),
        ({"clock": 1.5}, "clock must be a function returning seconds"),
    ],
)
def test_a_wrong_setting_fails_at_construction(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Inbox(**arguments)
    assert message in str(refused.value)


def test_a_setting_assigned_to_a_built_inbox_is_refused(inbox: Inbox) -> None:
    with pytest.raises(ConfigurationError, match=r"inbox.clock cannot be set on a built inbox"):
        inbox.clock = lambda: 0.0  # type: ignore[method-assign, assignment]
    with pytest.raises(ConfigurationError, match=r"pass max_body_size= to its constructor"):
        inbox.max_body_size = 10  # type: ignore[misc]


def test_the_removed_spellings_of_0_1_fail_as_unknown_names(inbox: Inbox) -> None:
    # docs/api.md#deprecations says what to write instead of each.
    with pytest.raises(TypeError, match="'claims'"):
        Inbox(claims=object())  # type: ignore[call-arg]
    for name in ("use_database", "use_ack_deadline", "retention", "receiver"):
        with pytest.raises(AttributeError, match=f"'{name}'"):
            getattr(inbox, name)


def test_settings_are_one_checked_value(tmp_path: Path) -> None:
    inbox = Inbox(
        f"sqlite:///{tmp_path / 'x.db'}", ack_deadline=None, retry=RetryPolicy(max_attempts=3)
    )
    assert inbox.settings.receiver.ack_deadline is None
    assert inbox.settings.retry == RetryPolicy(max_attempts=3)
    assert inbox.settings.statement_timeout is None


def test_the_environment_gives_the_default_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'from-env.db'}"
    monkeypatch.setenv("HOOKINBOX_DATABASE_URL", url)
    assert Inbox().settings.database_url == url
    assert Inbox("sqlite:///explicit.db").settings.database_url == "sqlite:///explicit.db"


def test_the_command_line_beats_the_application(tmp_path: Path) -> None:
    cli_url = f"sqlite:///{tmp_path / 'cli.db'}"
    with overriding(Overrides(database_url=cli_url, ack_deadline=0, group_commit=False)):
        inbox = Inbox("sqlite:///app.db", ack_deadline=3.0)
    assert inbox.settings.database_url == cli_url
    assert inbox.settings.receiver.ack_deadline is None  # 0 on the command line: off
    assert inbox.settings.group_commit is None


# -- the command line ------------------------------------------------------------------------


@pytest.mark.slow
def test_the_cli_shows_a_registration_mistake_as_one_line_and_exits_2(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    for command in (["migrate"], ["worker"], ["serve", "--port", "1"]):
        result = run_cli(*command, "tests.apps.misspelt:inbox", "--database-url", url)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip() == (
            "error: handler on_typo is for source 'strpe', which this inbox does not have "
            "(did you mean 'stripe'?); its sources: stripe"
        )
        assert not (tmp_path / "typo.db").exists(), "refused before the database was opened"
