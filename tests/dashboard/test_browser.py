"""End to end in headless Chromium: an on-call engineer signs in, finds the failed event,
reads it, replays it, and sees it processed.

Drives Debian's /usr/bin/chromium through Playwright (no browser download). Without it the
test fails, never skips: `.ci/run` installs it. Screenshots of the overview and of the event
are saved under $HOOKINBOX_TEST_ARTEFACTS (default: the test's tmp directory); the path is
printed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.cli.conftest import APP, Shop
from tests.dashboard.conftest import TOKEN
from tests.processing.conftest import checkout
from tests.support.server import free_port, hookinbox_command, serving

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 10_000


def artefacts_dir(tmp_path: Path) -> Path:
    directory = Path(os.environ.get("HOOKINBOX_TEST_ARTEFACTS") or tmp_path / "artefacts")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.mark.parametrize("backend", ["sqlite"])  # the page tests cover both databases
def test_find_read_replay_a_failed_event_in_a_browser(shop: Shop, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)")
    shop.deliver(checkout(1))
    shop.process()
    shop.fail(2)
    port = free_port()
    command = hookinbox_command(
        "dashboard", APP, "--database-url", shop.db_url, "--port", str(port)
    )
    artefacts = artefacts_dir(tmp_path)
    env = {"HOOKINBOX_ADMIN_TOKEN": TOKEN}
    with (
        serving(command, port, env=env, ready_path="/admin/login") as base,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)

            page.goto(f"{base}/admin/")
            expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
            page.get_by_label("Admin token").fill(TOKEN)
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_role("heading", name="Thresholds breached")).to_be_visible()
            expect(page.get_by_text("failed events: 1 (threshold 0)")).to_be_visible()
            page.screenshot(path=str(artefacts / "overview.png"), full_page=True)

            # Charts with axes, per source, over 24 hours (per hour) and 7 days (per 6 hours).
            page.get_by_role("link", name="Charts", exact=True).click()
            expect(page.get_by_role("heading", name="Charts: 24 hours, per hour")).to_be_visible()
            expect(page.get_by_role("heading", name="stripe")).to_be_visible()
            expect(page.locator("#chart-1-volume rect")).to_have_count(24)
            expect(page.locator("#chart-1-volume .axis.time text")).to_have_count(4)
            expect(page.locator("#chart-1-duplicates circle")).to_have_count(24)
            page.screenshot(path=str(artefacts / "charts.png"), full_page=True)
            page.get_by_role("link", name="7d", exact=True).click()
            expect(page.get_by_role("heading", name="Charts: 7 days, per 6 hours")).to_be_visible()
            expect(page.locator("#chart-1-failures rect")).to_have_count(28)

            # Payload search: the value at a JSON path.
            page.get_by_role("link", name="Events", exact=True).click()
            page.get_by_label("Payload path").fill("data.object.id")
            page.get_by_label("equals").fill("in_2")
            page.get_by_role("button", name="Filter").click()
            expect(page.locator("#search-note")).to_be_visible()
            expect(page.get_by_role("link", name="evt_1")).to_have_count(0)
            expect(page.get_by_role("link", name="evt_2")).to_be_visible()

            page.get_by_role("link", name="Events", exact=True).click()
            page.get_by_label("Status").select_option("failed")
            page.get_by_role("button", name="Filter").click()
            expect(page.get_by_role("link", name="evt_1")).to_have_count(0)
            page.get_by_role("link", name="evt_2").click()
            expect(page.locator("#status")).to_have_text("failed")
            expect(page.get_by_text("RuntimeError: payments API down")).to_be_visible()
            page.screenshot(path=str(artefacts / "event-failed.png"), full_page=True)

            page.get_by_role("link", name="Replay this event").click()
            expect(page.get_by_text("It is failed.", exact=False)).to_be_visible()
            page.get_by_role("button", name="Replay evt_2").click()
            expect(page.get_by_role("status")).to_contain_text("back to pending")
            expect(page.locator("#status")).to_have_text("pending")

            shop.outage.on = False  # the payments API is back; a worker runs
            shop.catch_up()
            assert shop.process() == 1
            page.reload()
            expect(page.locator("#status")).to_have_text("processed")
            page.screenshot(path=str(artefacts / "event-processed.png"), full_page=True)

            page.set_viewport_size({"width": 390, "height": 844})  # a phone
            pages = (
                "/admin/",
                "/admin/events",
                "/admin/charts",
                "/admin/event?source=stripe&id=evt_2",
                # The bulk erasure's dry run with a count and its confirmation form.
                "/admin/expunge?source=stripe&until=2100-01-01&path=data.object.id&equals=cs_1",
            )
            for path in pages:
                page.goto(base + path)
                if path.startswith("/admin/expunge"):
                    expect(page.get_by_role("button", name="Erase 1 payloads")).to_be_visible()
                    page.screenshot(path=str(artefacts / "expunge-phone.png"), full_page=True)
                # Wide tables scroll inside their box; the page itself never scrolls sideways.
                assert page.evaluate("document.documentElement.scrollWidth <= innerWidth"), path
            page.screenshot(path=str(artefacts / "event-phone.png"), full_page=True)
        finally:
            browser.close()
    print(f"\ndashboard screenshots: {artefacts}")
    assert {p.name for p in artefacts.iterdir()} >= {"overview.png", "event-failed.png"}
