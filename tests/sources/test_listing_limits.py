"""The limits a reconcile listing keeps against a provider API that misbehaves (issue 45), each
against the loopback imitation in a hostile mode: a cursor that never moves, pages without
end, a next page on another host, a delivery id that is a path, an answer that drips or never
ends. Each stops the listing with one `ProviderAPIError` line; none hangs, none sends the key
anywhere but the API's own origin."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from tests.support.hostile import MIB, Huge, dripping
from tests.support.listed import (
    GITHUB_TOKEN,
    SQUARE_TOKEN,
    STRIPE_KEY,
    hook_delivery,
    square_listed,
    stripe_listed,
)
from tests.support.loopback import Loopback, serving

from hookinbox import ConfigurationError
from hookinbox.sources import GitHub, Square, Stripe
from hookinbox.sources._provider_api import (
    BAD_ID,
    Budget,
    Limits,
    Listed,
    ProviderAPIError,
    same_origin,
)
from hookinbox.testing import FakeGitHubAPI, FakeSquareAPI, FakeStripeAPI

pytestmark = pytest.mark.slow  # a loopback server per test

HOOK = "octo-org/shop/12345678"
DELIVERIES = "/repos/octo-org/shop/hooks/12345678/deliveries"


def listed(source: Stripe | Square | GitHub, limits: Limits | None = None) -> list[list[Listed]]:
    return list(source.listing().pages(datetime.now(UTC) - timedelta(days=1), Budget(limits)))


def stripe(server: Loopback) -> Stripe:
    return Stripe(secret="whsec_x", api_key=STRIPE_KEY, api_base=server.url)


def square(server: Loopback) -> Square:
    return Square(secret="k", notification_url="https://shop.example.com/sq",
                  access_token=SQUARE_TOKEN, api_base=server.url)  # fmt: skip


def github(server: Loopback) -> GitHub:
    return GitHub(secret="s", api_token=GITHUB_TOKEN, hook=HOOK, api_base=server.url)


@pytest.fixture
def github_api() -> Iterator[tuple[FakeGitHubAPI, Loopback]]:
    now = datetime.now(UTC)
    api = FakeGitHubAPI(
        deliveries=[hook_delivery(n, now - timedelta(minutes=9 - n)) for n in range(9)]
    )
    with serving(api) as server:
        api.url = server.url
        yield api, server


# -- a cursor that must move, a page cap ---------------------------------------------------


def test_a_stripe_page_listed_again_stops_at_the_second_request() -> None:
    now = int(time.time())
    api = FakeStripeAPI([stripe_listed(n, now - 300 + n) for n in range(150)], stuck=True)
    with serving(api) as server, pytest.raises(ProviderAPIError, match="did not move"):
        listed(stripe(server))
    assert len(api.queries) == 2  # the first page, and the same page again: never a third


def test_a_square_cursor_given_again_stops_at_the_second_request() -> None:
    now = datetime.now(UTC)
    api = FakeSquareAPI(
        [square_listed(n, now - timedelta(minutes=n)) for n in range(150)], stuck=True
    )
    with serving(api) as server, pytest.raises(ProviderAPIError, match="did not move"):
        listed(square(server))
    assert len(api.searches) == 2  # cursor "100" given twice: followed once, then refused


@pytest.mark.parametrize("query", ["?per_page=100", "?per_page=100&cursor=v1_7"])
def test_a_github_next_link_to_a_page_listed_already_stops(
    github_api: tuple[FakeGitHubAPI, Loopback], query: str
) -> None:
    """The next link names the first page again, or the second page again and again."""
    api, server = github_api
    api.next_url = f"{server.url}{DELIVERIES}{query}"
    with pytest.raises(ProviderAPIError, match="did not move"):
        listed(github(server))
    assert server.count(f"{DELIVERIES}{query}") == 1


@pytest.mark.parametrize("provider", ["stripe", "square"])
def test_new_ids_on_every_page_stop_at_the_page_cap(provider: str) -> None:
    api = FakeStripeAPI(endless=True) if provider == "stripe" else FakeSquareAPI(endless=True)
    with serving(api) as server, pytest.raises(ProviderAPIError, match="more than 5 pages"):
        listed(stripe(server) if provider == "stripe" else square(server), Limits(max_pages=5))
    assert len(server.requests) == 5


# -- the next page only from api_base's origin ---------------------------------------------


def test_a_next_page_on_another_host_is_never_asked(
    github_api: tuple[FakeGitHubAPI, Loopback],
) -> None:
    """The token goes to api_base's origin only: another loopback address, another port, a
    user-info trick, each is refused before any request; the same origin is followed."""
    api, server = github_api
    port = server.url.rsplit(":", 1)[1]
    with serving(lambda request: (200, {}, b"[]"), host="127.0.0.2") as thief:
        other_port = f"http://127.0.0.1:{thief.url.rsplit(':', 1)[1]}"
        for next_url in (f"{thief.url}/steal", f"{other_port}/steal",
                         f"http://127.0.0.1:{port}@{thief.url.removeprefix('http://')}/steal",
                         f"https://127.0.0.1:{port}{DELIVERIES}?cursor=v1_5"):  # fmt: skip
            api.next_url = next_url
            with pytest.raises(ProviderAPIError, match="another origin"):
                listed(github(server))
        assert thief.requests == []
    api.next_url = f"{server.url}/repositories/1296269/hooks/12345678/deliveries?cursor=v1_5"
    with pytest.raises(ProviderAPIError, match="404"):  # followed: same origin, another path
        listed(github(server))


def test_same_origin_holds_scheme_host_and_port() -> None:
    base = "https://api.github.com"
    assert same_origin(base, "https://api.github.com/repositories/1/hooks/2/deliveries?c=1")
    assert same_origin(base, "https://API.github.com:443/x")
    for other in ("http://api.github.com/x", "https://api.github.com:8443/x",
                  "https://api.github.com.evil.example/x", "https://evil.example/x",
                  "https://user@api.github.com/x", "//evil.example/x", "/relative",
                  "https://api.github.com:x/", "javascript:alert(1)"):  # fmt: skip
        assert not same_origin(base, other), other
    assert same_origin("http://127.0.0.1:8080", "http://127.0.0.1:8080/next")
    assert not same_origin("http://127.0.0.1:8080", "http://localhost:8080/next")


# -- ids checked before they go into a path ------------------------------------------------


def test_a_delivery_id_that_is_not_an_integer_is_marked_and_never_asked_of(
    github_api: tuple[FakeGitHubAPI, Loopback],
) -> None:
    api, server = github_api
    now = datetime.now(UTC)
    bad_ids = ["1/../../../../../user/keys", "12", 1.5, True, None, -3, 0, 2**70]
    api.planted = [{**hook_delivery(100 + n, now, status_code=500), "id": bad}
                   for n, bad in enumerate(bad_ids)]  # fmt: skip
    api.deliveries.append(hook_delivery(50, now, status_code=500))  # a good one, failed
    listing = github(server).listing()
    budget = Budget(Limits())
    pages = list(listing.pages(now - timedelta(days=1), budget))
    entries = [entry for page in pages for entry in page]
    marked = [entry for entry in entries if entry.skip == BAD_ID]
    assert len(marked) == len(bad_ids) and all(entry.resend is None for entry in marked)
    for entry in entries:
        if entry.resend is not None:
            listing.resend(entry, budget)
    posts = [request.path for request in server.requests if request.method == "POST"]
    assert posts == [f"{DELIVERIES}/10000050/attempts"]


# -- deadlines, and answers cut at the limit -----------------------------------------------


def test_a_page_that_drips_stops_at_its_deadline() -> None:
    api = FakeStripeAPI(answer=lambda: dripping(every=0.3))
    with serving(api) as server:
        started = time.monotonic()
        with pytest.raises(ProviderAPIError, match="page took longer than 2 s"):
            listed(stripe(server), Limits(page_timeout=2))
        assert time.monotonic() - started < 2 + 1.5  # the deadline, not 30 s a read


def test_a_run_stops_at_its_deadline() -> None:
    api = FakeStripeAPI(endless=True)
    with serving(api) as server:
        started = time.monotonic()
        # The deadline stops the run between pages, or cuts the page in flight (its read is
        # given only what is left of the run) and then refuses a retry that would pass it.
        deadline = r"run took longer than 1\.5 s|would pass the run's deadline \(1\.5 s\)"
        with pytest.raises(ProviderAPIError, match=deadline):
            listed(stripe(server), Limits(run_timeout=1.5))
        assert time.monotonic() - started < 1.5 + 1.5
    assert len(api.queries) > 1  # it did page, until the run's deadline


def test_a_retry_that_would_wait_past_the_run_deadline_is_not_waited() -> None:
    api = FakeStripeAPI(faults=[(429, {"Retry-After": "30"})])
    pauses: list[float] = []
    with serving(api) as server:
        listing = stripe(server).listing()
        listing._sleep = pauses.append  # type: ignore[attr-defined]
        with pytest.raises(ProviderAPIError, match=r"answered 429.*run's deadline \(5 s\)"):
            list(listing.pages(datetime.now(UTC), Budget(Limits(run_timeout=5))))
    assert pauses == []


def test_an_answer_past_the_limit_is_cut_and_named_too_large() -> None:
    huge = Huge(300 * MIB)
    with serving(FakeStripeAPI(answer=huge.answer)) as server:
        with pytest.raises(ProviderAPIError, match="more than 16 MiB: too large"):
            listed(stripe(server))
    assert huge.sent < 40 * MIB  # reading stopped at the limit (16 MiB, and socket buffers)


def test_an_answer_that_names_a_length_past_the_limit_is_refused_before_reading() -> None:
    huge = Huge(300 * MIB, declared=True)
    with serving(FakeStripeAPI(answer=huge.answer)) as server:
        with pytest.raises(ProviderAPIError, match="more than 1 MiB: too large"):
            listed(stripe(server), Limits(max_answer_bytes=MIB))
    assert huge.sent < 24 * MIB


def test_a_page_of_more_events_than_asked_for_is_refused() -> None:
    now = int(time.time())
    page = {"object": "list", "data": [stripe_listed(n, now) for n in range(101)],
            "has_more": False}  # fmt: skip
    api = FakeStripeAPI(answer=lambda: (200, {}, json.dumps(page).encode()))
    with serving(api) as server, pytest.raises(ProviderAPIError, match="101 items to a page"):
        listed(stripe(server))


def test_the_command_line_shows_the_limits_defaults() -> None:
    from hookinbox.cli._reconcile import (
        DEFAULT_MAX_PAGES,
        DEFAULT_PAGE_TIMEOUT,
        DEFAULT_RUN_TIMEOUT,
        duration,
    )

    shown = Limits(
        page_timeout=duration(DEFAULT_PAGE_TIMEOUT).total_seconds(),
        run_timeout=duration(DEFAULT_RUN_TIMEOUT).total_seconds(),
        max_pages=DEFAULT_MAX_PAGES,
    )
    assert shown == Limits() == Limits(60, 1800, 10_000, 16 * MIB)  # as docs/reconcile.md says


def test_limits_are_checked_when_built() -> None:
    for bad in ({"page_timeout": 0}, {"run_timeout": -1}, {"max_pages": 0},
                {"max_answer_bytes": 0}, {"page_timeout": float("nan")}):  # fmt: skip
        with pytest.raises(ConfigurationError):
            Limits(**bad)  # type: ignore[arg-type]
