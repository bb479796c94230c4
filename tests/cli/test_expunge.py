"""`hookinbox expunge`: an erased event keeps its key, status and log, shows "payload erased"
and a redelivery is a duplicate; the dry run's count is the erasure's; a bulk erasure off a
terminal needs --yes; bad input is one error line (exit 2), a missing event exit 1."""

from __future__ import annotations

from hookinbox import Status
from tests.cli.conftest import APP, Shop, ago, error_line, parsed
from tests.processing.conftest import checkout


def customer(number: int, who: str) -> dict[str, object]:
    event = checkout(number)
    event["data"] = {"object": {"id": f"cs_{number}", "customer": who}}
    return event


def test_one_event_is_erased_audited_and_still_a_duplicate(shop: Shop) -> None:
    shop.deliver(checkout(1))
    shop.process()
    dry = shop.cli("expunge", APP, "stripe", "evt_1", "--dry-run")
    assert (dry.returncode, dry.stdout) == (0, "stripe evt_1: would erase its payload (dry run)\n")
    assert shop.event("evt_1").body != b""

    erased = shop.cli("expunge", APP, "stripe", "evt_1", "--reason", "GDPR 42")
    again = shop.cli("expunge", APP, "stripe", "evt_1")
    assert (erased.returncode, erased.stdout) == (0, "stripe evt_1: payload erased\n")
    assert (again.returncode, again.stdout) == (0, "stripe evt_1: payload already erased\n")
    event = shop.event("evt_1")
    assert (event.status, event.body, event.headers) == (Status.PROCESSED, b"", {})
    assert shop.audit_trail("event_id", "action", "reason", "previous_status") == [
        ("evt_1", "expunge", "GDPR 42", "processed")
    ]

    shop.deliver(checkout(1))  # the provider sends it again: a duplicate, nothing stored
    assert shop.process() == 0
    assert shop.event("evt_1").body == b""
    shown, text = shop.cli_all(
        ["events", "show", APP, "stripe", "evt_1", "--json"],
        ["events", "show", APP, "stripe", "evt_1"],
    )
    document = parsed(shown)
    assert document["payload_erased"] is True and document["status"] == "processed"
    assert [d["duplicate"] for d in document["deliveries"]] == [False, True]
    assert "payload erased" in text.stdout


def test_by_age_dry_run_then_erase_with_yes(shop: Shop) -> None:
    for number in (1, 2, 3):
        shop.deliver(checkout(number))
    shop.set_received_at(["evt_1", "evt_2"], ago(days=40))

    dry = shop.cli("expunge", APP, "--source", "stripe", "--older-than", "30d", "--dry-run")
    piped = shop.cli("expunge", APP, "--source", "stripe", "--older-than", "30d")
    assert dry.stdout == "would erase 2 stripe payloads (dry run: nothing changed)\n"
    assert "2 stripe payloads match" in error_line(piped, 2) and "--yes" in piped.stderr
    assert shop.event("evt_1").body != b""  # refused: nothing erased

    done = shop.cli("expunge", APP, "--source", "stripe", "--older-than", "30d", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert parsed(done) == {"source": "stripe", "matched": None, "erased": 2, "dry_run": False}
    assert [shop.event(f"evt_{n}").body == b"" for n in (1, 2, 3)] == [True, True, False]


def test_by_payload_value_only_the_matching_events(shop: Shop) -> None:
    shop.deliver(customer(1, "cus_1"))
    shop.deliver(customer(2, "cus_2"))
    shop.deliver(customer(3, "cus_1"))
    args = ["expunge", APP, "--source", "stripe", "--payload", "data.object.customer=cus_1"]
    dry = shop.cli(*args, "--dry-run", "--json")
    done = shop.cli(*args, "--yes")
    assert parsed(dry)["matched"] == 2
    assert done.stdout == "erased 2 stripe payloads\n"
    assert [shop.event(f"evt_{n}").body == b"" for n in (1, 2, 3)] == [True, False, True]
    assert sorted(row[0] for row in shop.audit_trail("event_id")) == ["evt_1", "evt_3"]


def test_bad_input_is_one_error_line(shop: Shop) -> None:
    shop.deliver(checkout(1))
    missing, typo, bad_age, no_unit, no_filter, no_equals, stray = shop.cli_all(
        ["expunge", APP, "stripe", "evt_nope"],
        ["expunge", APP, "--source", "strpe", "--older-than", "1d", "--dry-run"],
        ["expunge", APP, "--source", "stripe", "--older-than", "soon"],
        ["expunge", APP, "--source", "stripe", "--older-than", "30"],
        ["expunge", APP, "--source", "stripe"],
        ["expunge", APP, "--source", "stripe", "--payload", "customer"],
        ["expunge", APP, "stripe", "evt_1", "--older-than", "1d"],
    )
    assert "no event stripe evt_nope" in error_line(missing, 1)
    assert "stripe" in error_line(typo, 2)  # did you mean
    assert "soon" in error_line(bad_age, 2)
    assert "no unit" in error_line(no_unit, 2)
    assert "--older-than or --payload" in error_line(no_filter, 2)
    assert "PATH=VALUE" in error_line(no_equals, 2)
    assert "--source" in error_line(stray, 2)
    assert shop.event("evt_1").body != b""
