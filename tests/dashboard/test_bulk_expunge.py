"""The bulk erasure from the dashboard: the events list links to it with its source, time and
payload filters; its page is the dry run (a count, nothing erased), whose form (CSRF, a
required reason) erases exactly what was counted, audited as by "dashboard"; bad input is a
400 that says why; the events list marks erased events."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from urllib.parse import unquote_plus

from tests.cli.conftest import Shop, ago
from tests.dashboard.conftest import Browser, csrf_of
from tests.processing.conftest import checkout


def hidden_fields(page: str) -> dict[str, str]:
    form = page[page.index('<form method="post" action="/admin/expunge"') :]
    form = form[: form.index("</form>")]
    return dict(re.findall(r'type="hidden" name="([^"]+)" value="([^"]*)"', form))


def erased_marks(page: str) -> set[str]:
    """The event ids of the list's rows marked erased."""
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page, flags=re.S)
    return {
        re.search(r'id=(evt_\w+)"', row).group(1)  # type: ignore[union-attr]
        for row in rows
        if 'class="badge"' in row
    }


def test_dry_run_then_erase_by_age_and_payload_value(signed_in: Browser, shop: Shop) -> None:
    for number in range(1, 6):
        shop.deliver(checkout(number, payment="pi_gdpr" if number in (1, 2, 5) else None))
    shop.process()
    shop.set_received_at(["evt_1", "evt_2", "evt_3"], ago(days=40))

    listed = signed_in.get("/admin/events?source=stripe&until=30d").text
    link = re.search(r'href="(/admin/expunge\?[^"]+)" id="erase-link"', listed)
    assert link is not None and erased_marks(listed) == set()
    url = unquote_plus(link.group(1).replace("&amp;", "&"))
    assert "source=stripe" in url and "until=" in url

    # Older than 30 days and holding pi_gdpr: evt_1 and evt_2 (evt_5 is new, evt_3 holds another).
    query = {"source": "stripe", "until": "30d", "path": "data.object.payment_intent",
             "equals": "pi_gdpr"}  # fmt: skip
    dry = signed_in.get("/admin/expunge", params=query)
    assert dry.status_code == 200, dry.text
    assert re.search(r'id="count"><strong>2</strong> stripe payloads match', dry.text)
    assert "Erase 2 payloads" in dry.text
    assert all(shop.event(f"evt_{n}").body for n in range(1, 6))  # a dry run erases nothing
    fields = hidden_fields(dry.text)
    assert fields["source"] == "stripe" and fields["equals"] == "pi_gdpr"
    # "30d" fixed as the time it meant at the dry run: the erasure erases what was counted.
    assert abs(datetime.fromisoformat(fields["until"]) - ago(days=30)) < timedelta(minutes=1)

    form = {**fields, "csrf": csrf_of(dry.text)}
    assert signed_in.post("/admin/expunge", data={**form, "reason": "x", "csrf": "no"}
                          ).status_code == 403  # fmt: skip
    no_reason = signed_in.post("/admin/expunge", data={**form, "reason": "  "})
    assert no_reason.status_code == 400 and "give a reason" in no_reason.text
    assert all(shop.event(f"evt_{n}").body for n in range(1, 6))

    done = signed_in.post("/admin/expunge", data={**form, "reason": "GDPR 42"})

    assert done.status_code == 200, done.text
    assert "Erased 2 stripe payloads" in done.text
    assert {n for n in range(1, 6) if not shop.event(f"evt_{n}").body} == {1, 2}
    assert shop.audit_trail("event_id", "action", "actor", "reason") == [
        ("evt_1", "expunge", "dashboard", "GDPR 42"),
        ("evt_2", "expunge", "dashboard", "GDPR 42"),
    ]
    assert erased_marks(signed_in.get("/admin/events").text) == {"evt_1", "evt_2"}
    again = signed_in.get("/admin/expunge", params=query).text
    assert "No stripe payloads match" in again


def test_the_page_asks_for_a_selection_and_refuses_bad_input(
    signed_in: Browser, shop: Shop
) -> None:
    shop.deliver(checkout(1))
    empty = signed_in.get("/admin/expunge")
    assert empty.status_code == 200 and "Give a source" in empty.text
    assert 'id="count"' not in empty.text
    alone = signed_in.get("/admin/expunge?source=stripe")  # no filter: nothing counted
    assert alone.status_code == 200 and 'id="count"' not in alone.text
    unknown = signed_in.get("/admin/expunge?source=strpie&until=1d")
    assert unknown.status_code == 200 and "No event of the source strpie is stored" in unknown.text

    for query, said in [
        ("source=stripe&until=yesterday", "yesterday"),
        ("source=stripe&path=a..b&equals=1", "payload path segment"),
        ("source=stripe&until=1d%00", "NUL"),
    ]:
        answer = signed_in.get(f"/admin/expunge?{query}")
        assert answer.status_code == 400 and said in answer.text, (query, answer.text)
    csrf = csrf_of(empty.text)
    incomplete = signed_in.post(
        "/admin/expunge", data={"csrf": csrf, "source": "stripe", "reason": "r"}
    )
    assert incomplete.status_code == 400 and "give a source" in incomplete.text
    assert shop.event("evt_1").body
