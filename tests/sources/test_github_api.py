"""GitHub's hook deliveries API: the loopback imitation held to octokit (`@octokit/rest`), and
the listing `hookinbox reconcile` uses (`HookDeliveries`) against it."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.support.listed import GITHUB_TOKEN, hook_delivery
from tests.support.loopback import Loopback, serving
from tests.testing.npm_oracles import oracle_dir

from hookinbox import ConfigurationError
from hookinbox.sources import GitHub
from hookinbox.sources._github_api import HookDeliveries
from hookinbox.sources._provider_api import APIRefused, Budget
from hookinbox.testing import FakeGitHubAPI

pytestmark = pytest.mark.slow  # a loopback server per test

NOW = datetime.now(UTC)
ORACLE = Path(__file__).parents[1] / "support" / "github_oracle.mjs"


@pytest.fixture(params=["octo-org/shop/12345678", "octo-org/42"])
def api(request: pytest.FixtureRequest) -> FakeGitHubAPI:
    deliveries = [
        hook_delivery(n, NOW - timedelta(minutes=250 - n), status_code=500 if n % 3 else 200)
        for n in range(250)
    ]
    return FakeGitHubAPI(hook=request.param, deliveries=deliveries)


@pytest.fixture
def server(api: FakeGitHubAPI) -> Iterator[Loopback]:
    with serving(api) as loopback:
        api.url = loopback.url
        yield loopback


def octokit(server: Loopback, api: FakeGitHubAPI, token: str, redeliver: int | None) -> dict:  # type: ignore[type-arg]
    directory = oracle_dir()
    shutil.copyfile(ORACLE, directory / "github_oracle.mjs")
    request = {"base": server.url, "token": token, "hook": api.hook_path, "redeliver": redeliver}
    done = subprocess.run(
        ["node", str(directory / "github_oracle.mjs")],
        input=json.dumps(request), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_the_imitation_pages_and_redelivers_as_octokit_reads_github(
    api: FakeGitHubAPI, server: Loopback
) -> None:
    seen = octokit(server, api, GITHUB_TOKEN, redeliver=10_000_007)
    newest_first = sorted(api.deliveries, key=lambda d: d["id"], reverse=True)
    assert seen["guids"] == [d["guid"] for d in newest_first]
    assert seen["redelivery"] == 202 and api.redelivered == [10_000_007]
    assert octokit(server, api, "ghp_wrong", redeliver=None) == {"error": 401}


def listing(server: Loopback, api: FakeGitHubAPI, token: str = GITHUB_TOKEN) -> HookDeliveries:
    source = GitHub(secret="s", api_token=token, hook=api.hook, api_base=server.url)
    found = source.listing()
    assert isinstance(found, HookDeliveries)
    return found


def test_pages_stop_at_since_and_name_failed_deliveries(
    api: FakeGitHubAPI, server: Loopback
) -> None:
    pages = list(listing(server, api).pages(NOW - timedelta(minutes=120, seconds=30), Budget()))
    listed = [entry for page in pages for entry in page]
    assert len(listed) == 120  # the deliveries of the last two hours, newest first
    first = listed[0]
    assert first.headers["x-github-delivery"] == api.deliveries[249]["guid"]
    assert first.headers["x-github-event"] == "push"
    assert first.headers["x-github-hook-id"] == api.hook.rsplit("/", 1)[-1]
    assert first.resend is None  # 249 % 3 == 0: delivered
    assert listed[1].resend == str(api.deliveries[248]["id"])  # failed (500)


def test_a_guid_is_listed_once_at_its_newest_attempt(api: FakeGitHubAPI, server: Loopback) -> None:
    api.redeliver_as(api.deliveries[248])  # failed, then redelivered with success
    pages = listing(server, api).pages(NOW - timedelta(minutes=3), Budget())
    listed = [entry for page in pages for entry in page]
    guids = [e.headers["x-github-delivery"] for e in listed]
    assert guids.count(api.deliveries[248]["guid"]) == 1 and listed[0].resend is None


def test_a_refused_token_fails_at_once(api: FakeGitHubAPI, server: Loopback) -> None:
    with pytest.raises(APIRefused, match="401"):
        list(listing(server, api, token="ghp_wrong").pages(NOW, Budget()))


def test_the_hook_is_checked_when_the_source_is_built() -> None:
    assert GitHub(secret="s", hook="octo-org/shop/1").hook_path == "repos/octo-org/shop/hooks/1"
    assert GitHub(secret="s", hook="octo-org/1").hook_path == "orgs/octo-org/hooks/1"
    for bad in ("octo-org", "octo-org/shop/x", "a/b/c/1", "a b/1"):
        with pytest.raises(ConfigurationError, match="OWNER/REPO/HOOK_ID"):
            GitHub(secret="s", hook=bad)
    with pytest.raises(ConfigurationError, match="needs api_token and hook"):
        GitHub(secret="s", api_token=GITHUB_TOKEN).listing()
    assert GITHUB_TOKEN not in repr(
        GitHub(secret="s", api_token=GITHUB_TOKEN, hook="o/1").listing()
    )
