"""`hookinbox pause` and `resume`: a paused source's deliveries are stored and answered, none
processed; `events list --status paused` and `status` show them; resumed, each is processed
once; an unknown source is one error line (exit 2), resuming a source that is not paused exit 1;
both are audited."""

from __future__ import annotations

from hookinbox import Status
from tests.cli.conftest import APP, Shop, error_line, parsed
from tests.processing.conftest import checkout


def test_pause_keeps_storing_processes_nothing_then_resume_processes_once(shop: Shop) -> None:
    shop.deliver(checkout(1))
    paused = shop.cli("pause", APP, "stripe", "--reason", "warehouse API down")
    assert (paused.returncode, paused.stderr) == (0, "")
    assert paused.stdout == "stripe: paused; 1 open events parked\n"
    shop.deliver(checkout(2))
    shop.deliver(checkout(1), source="connect")  # another source goes on
    assert shop.process() == 1
    assert shop.statuses() == {
        ("stripe", "evt_1"): "paused",
        ("stripe", "evt_2"): "paused",
        ("connect", "evt_1"): "unhandled",  # processed: no handler takes it
    }
    listed, status = shop.cli_all(
        ["events", "list", APP, "--status", "paused", "--json"], ["status", APP, "--json"]
    )
    assert sorted(row["event_id"] for row in parsed(listed)) == ["evt_1", "evt_2"]
    figures = parsed(status)
    assert [p["source"] for p in figures["paused_sources"]] == ["stripe"]
    assert {"source": "stripe", "status": "paused", "count": 2} in figures["events"]

    resumed = shop.cli("resume", APP, "stripe", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert parsed(resumed) == {"paused": False, "resumed": 2, "source": "stripe",
                               "was_paused": True}  # fmt: skip
    shop.catch_up()
    assert shop.process() == 2
    assert shop.process() == 0
    for number in (1, 2):
        event = shop.event(f"evt_{number}")
        assert (event.status, event.attempts) == (Status.PROCESSED, 1)
    assert shop.audit_trail("action", "event_id", "reason") == [
        ("pause", "*", "warehouse API down"),
        ("resume", "*", None),
    ]


def test_unknown_sources_and_a_resume_of_an_active_source_are_one_line(shop: Shop) -> None:
    shop.deliver(checkout(1))
    typo, unknown, without_app, active = shop.cli_all(
        ["pause", APP, "strpe"],
        ["pause", APP, "paypal"],
        ["pause", "paypal"],
        ["resume", APP, "stripe"],
    )
    assert error_line(typo, 2) == "error: no source is named 'strpe' (did you mean 'stripe'?)"
    assert error_line(unknown, 2).startswith("error: no source is named 'paypal'")
    assert error_line(without_app, 2).startswith("error: no source is named 'paypal'")
    assert error_line(active, 1) == "error: source 'stripe' is not paused"
    shop.process()
    assert shop.event("evt_1").status is Status.PROCESSED


def test_the_inbox_pauses_and_resumes_as_the_command_does(shop: Shop) -> None:
    inbox = shop.inbox
    assert inbox.pause("stripe", actor="deploy-bot", reason="migration") == 0
    assert inbox.paused_sources() == ["stripe"]
    shop.deliver(checkout(1))
    assert shop.process() == 0
    assert inbox.resume("stripe") == 1
    shop.catch_up()
    assert shop.process() == 1
    assert inbox.paused_sources() == []
