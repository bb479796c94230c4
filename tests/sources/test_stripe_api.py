"""Stripe's events API: the loopback imitation held to the official `stripe` SDK, and the
listing `hookinbox reconcile` uses (`StripeEvents`) against it: pages, rate limits, faults."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import stripe
from tests.support.listed import STRIPE_KEY, stripe_listed
from tests.support.loopback import Loopback, serving

from hookinbox import ConfigurationError
from hookinbox.sources import Stripe
from hookinbox.sources._provider_api import MAX_RETRY_AFTER, APIRefused, Budget, ProviderAPIError
from hookinbox.sources._stripe_api import StripeEvents
from hookinbox.testing import FakeStripeAPI

pytestmark = pytest.mark.slow  # a loopback server per test

NOW = int(time.time())


@pytest.fixture
def api() -> FakeStripeAPI:
    return FakeStripeAPI([stripe_listed(n, NOW - 250 + n) for n in range(250)])


@pytest.fixture
def server(api: FakeStripeAPI) -> Iterator[Loopback]:
    with serving(api) as loopback:
        yield loopback


def sdk(server: Loopback, key: str = STRIPE_KEY) -> stripe.StripeClient:
    return stripe.StripeClient(key, base_addresses={"api": server.url}, max_network_retries=0)


def test_the_imitation_pages_as_the_sdk_reads_stripe(api: FakeStripeAPI, server: Loopback) -> None:
    listed = sdk(server).v1.events.list({"limit": 100, "created": {"gte": NOW - 100}})
    ids = [event.id for event in listed.auto_paging_iter()]
    assert ids == [f"evt_{n:024d}" for n in reversed(range(150, 250))]  # newest first
    first = sdk(server).v1.events.list({"limit": 100})
    assert len(first.data) == 100 and first.has_more
    assert first.data[0].type == "invoice.paid" and first.data[0].object == "event"


def test_the_imitation_refuses_as_stripe_does(server: Loopback) -> None:
    with pytest.raises(stripe.AuthenticationError):
        sdk(server, "sk_test_wrong").v1.events.list()
    with pytest.raises(stripe.InvalidRequestError) as missing:
        sdk(server).v1.events.list({"starting_after": "evt_none"})
    assert missing.value.code == "resource_missing"
    with pytest.raises(stripe.InvalidRequestError):
        sdk(server).v1.events.list({"limit": 101})


def test_the_imitation_rate_limits_as_stripe_does(api: FakeStripeAPI, server: Loopback) -> None:
    api.faults.append((429, {"Retry-After": "0"}))
    with pytest.raises(stripe.RateLimitError):
        sdk(server).v1.events.list()


def listing(server: Loopback, pauses: list[float], key: str = STRIPE_KEY) -> StripeEvents:
    source = Stripe(secret="whsec_x", api_key=key, api_base=server.url)
    events = source.listing()
    assert isinstance(events, StripeEvents)
    events._sleep = pauses.append
    return events


def test_pages_follow_has_more_with_the_last_id(api: FakeStripeAPI, server: Loopback) -> None:
    pages = list(listing(server, []).pages(datetime.fromtimestamp(NOW - 250, UTC), Budget()))
    assert [len(page) for page in pages] == [100, 100, 50]
    assert len({listed.body for page in pages for listed in page}) == 250
    assert api.queries[0] == {"created[gte]": str(NOW - 250), "limit": "100"}
    assert api.queries[1]["starting_after"] == f"evt_{150:024d}"  # the last of page one
    assert set(api.queries[2]) == {"created[gte]", "limit", "starting_after"}  # no filter more


def test_since_is_sent_as_created_gte(server: Loopback) -> None:
    pages = list(listing(server, []).pages(datetime.fromtimestamp(NOW - 10, UTC), Budget()))
    assert sum(len(page) for page in pages) == 10


def test_429_waits_for_retry_after_then_succeeds(api: FakeStripeAPI, server: Loopback) -> None:
    api.faults += [(429, {"Retry-After": "2"}), (429, {"Retry-After": "3600"})]
    pauses: list[float] = []
    pages = list(listing(server, pauses).pages(datetime.fromtimestamp(NOW - 5, UTC), Budget()))
    assert pauses == [2.0, MAX_RETRY_AFTER] and len(pages[0]) == 5


def test_5xx_backs_off_and_gives_up_after_five_tries(api: FakeStripeAPI, server: Loopback) -> None:
    api.faults += [(500, {})] * 5
    pauses: list[float] = []
    with pytest.raises(ProviderAPIError, match="answered 500, 5 tries"):
        list(listing(server, pauses).pages(datetime.fromtimestamp(NOW - 5, UTC), Budget()))
    assert pauses == [1.0, 2.0, 4.0, 8.0]


def test_a_refused_key_fails_at_once_without_the_key(server: Loopback) -> None:
    pauses: list[float] = []
    with pytest.raises(APIRefused) as refused:
        list(listing(server, pauses, key="sk_test_wrong_key").pages(datetime.now(UTC), Budget()))
    assert "sk_" not in str(refused.value) and "401" in str(refused.value)
    assert pauses == []


def test_the_key_and_base_are_checked_when_the_source_is_built() -> None:
    with pytest.raises(ConfigurationError, match="api_base"):
        Stripe(secret="whsec_x", api_key=STRIPE_KEY, api_base="http://api.example.com")
    with pytest.raises(ConfigurationError, match="api_key"):
        Stripe(secret="whsec_x", api_key=" ")
    with pytest.raises(ConfigurationError, match="has no api_key"):
        Stripe(secret="whsec_x").listing()
    assert STRIPE_KEY not in repr(Stripe(secret="whsec_x", api_key=STRIPE_KEY).listing())
