"""A rolling upgrade and its rollback, with the previous release's wheel (docs/upgrading.md).

The previous release is built by `tests/support/previous_release.py` (its docstring says which
commit, and what is simulated until a migration lands after schema 12); this tree's code is
the new release. The example shop, served by `hookinbox serve` (HTTP and a worker per host),
takes signed Stripe deliveries from the simulator with its trouble (duplicates, bursts, lost
responses, updates before their checkout), and each run is judged by `verify`: every
acknowledged event processed, each effect once.

1. The fleet runs the previous release (host A), which creates the schema, at its version.
2. Under traffic to A, the new release checks and plans the upgrade (`migrate --check` exits
   1 naming the step; `--plan` lists it, expand) and migrates; A keeps serving and processing.
3. Host B runs the new release beside A; traffic to both, concurrently: lost 0, doubled 0.
4. Rollback: B's processes stop and B runs the previous release again, on the new schema,
   without a restore (a process of it starting there: the compatible range's gate); traffic
   to A and B: lost 0, doubled 0; the previous release's `migrate --check` says the schema is
   newer and that it runs on it, and its `migrate` changes nothing.

When the new release's newest step is a contract step, the previous release must refuse to
start on the migrated schema instead, in one line (exit 2): then that is what is checked.
On SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager

import pytest

from hookinbox._storage import LATEST_VERSION
from hookinbox._storage._compatibility import Kind
from hookinbox._storage._migrations import MIGRATIONS, oldest_code
from hookinbox.simulate import SimulationConfig, simulate, verify, wait_until_drained
from tests.support import previous_release
from tests.support.previous_release import Release
from tests.support.server import ROOT, free_port, hookinbox_command, run_cli, serving

pytestmark = pytest.mark.slow

SHOP = "hookinbox.examples.shop:inbox"
SECRET = "whsec_local_trial"  # the shop's default Stripe secret


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    built = previous_release.build(tmp_path_factory.mktemp("previous-release"))
    print(f"\nprevious release: {built.described}")
    assert built.schema < LATEST_VERSION
    return built


def _env(release: Release | None) -> dict[str, str]:
    env = dict(os.environ)
    if release is not None:
        env.update(release.env)
    return env


@contextmanager
def host(database_url: str, release: Release | None) -> Iterator[str]:
    """`hookinbox serve` of the shop (HTTP and one worker): the previous release's, or this
    tree's (None); yields the Stripe webhook URL."""
    port = free_port()
    args = ("serve", SHOP, "--database-url", database_url, "--port", str(port),
            "--log-level", "warning")  # fmt: skip
    command = release.command(*args) if release else hookinbox_command(*args)
    with serving(command, port, env=release.env if release else None) as base_url:
        yield f"{base_url}/webhooks/stripe"


def _traffic(target: str, seed: int, events: int) -> SimulationConfig:
    return SimulationConfig(
        provider="stripe", secret=SECRET, target=target, events=events, concurrency=8,
        seed=seed, duplicate_rate=0.03, burst_rate=0.02, burst_size=3,
        lost_response_rate=0.02, out_of_order_rate=0.3,
    )  # fmt: skip


def _exactly_once(database_url: str, *configs: SimulationConfig) -> int:
    """The runs, concurrently; then each judged once the workers drained: lost 0, doubled 0.
    Returns the events acknowledged."""
    with ThreadPoolExecutor(len(configs)) as pool:
        reports = list(pool.map(lambda c: simulate(c, progress=False), configs))
    acknowledged = 0
    for config, report in zip(configs, reports, strict=True):
        assert report.complete and len(report.acknowledged) == config.events, report
        assert wait_until_drained(database_url, 90, since=report.started_at)
        result = verify(report, database_url)
        assert (result.lost, result.doubled, result.states_wrong) == (0, 0, 0), result
        assert result.processed == result.expected == config.events
        assert result.ok, result.problems
        acknowledged += len(report.acknowledged)
    return acknowledged


def _cli(release: Release | None, *args: str) -> subprocess.CompletedProcess[str]:
    if release is None:
        return run_cli(*args)
    return subprocess.run(
        release.command(*args), cwd=ROOT, env=_env(release), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_previous_release_serves_beside_the_new_one_and_takes_over_again(
    empty_db_url: str, release: Release
) -> None:
    url = empty_db_url
    withheld = range(release.schema + 1, LATEST_VERSION + 1)
    contract = oldest_code(MIGRATIONS, LATEST_VERSION) > release.schema
    with ExitStack() as fleet:
        host_a = fleet.enter_context(host(url, release))  # 1. creates the schema, at its version
        check = _cli(None, "migrate", "--check", "--database-url", url)
        assert check.returncode == 1
        assert f"pending ({', '.join(map(str, withheld))})" in check.stdout
        plan = _cli(None, "migrate", "--plan", "--database-url", url).stdout.splitlines()
        kinds = [MIGRATIONS[v - 1].kind.value for v in withheld]
        assert [line.split()[:2] for line in plan[2:]] == [
            [str(v), k] for v, k in zip(withheld, kinds, strict=True)
        ]
        # 2. The upgrade's first step, under traffic to the previous release.
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(_exactly_once, url, _traffic(host_a, seed=481, events=120))
            upgrade = run_cli("migrate", "--database-url", url, timeout=120)
            served = running.result()
        assert upgrade.returncode == 0, upgrade.stderr
        assert _cli(None, "migrate", "--check", "--database-url", url).returncode == 0
        if contract:
            fleet.close()  # a contract release: the previous one may not start again
            refused = _cli(release, "migrate", "--database-url", url)
            assert refused.returncode == 2 and "upgrade hookinbox" in refused.stderr
            assert MIGRATIONS[-1].kind is Kind.CONTRACT
            return
        # 3. Host B runs the new release beside A.
        with host(url, None) as host_b:
            served += _exactly_once(
                url, _traffic(host_a, seed=482, events=100), _traffic(host_b, seed=483, events=100)
            )
        # 4. Rollback: B runs the previous release again, on the new schema.
        host_b = fleet.enter_context(host(url, release))
        served += _exactly_once(
            url, _traffic(host_a, seed=484, events=100), _traffic(host_b, seed=485, events=100)
        )
    assert served == 520
    check = _cli(release, "migrate", "--check", "--json", "--database-url", url)
    assert check.returncode == 1 and '"state": "newer_compatible"' in check.stdout
    again = _cli(release, "migrate", "--database-url", url)
    assert again.returncode == 0 and again.stdout.startswith("nothing to migrate"), again
    assert _cli(None, "migrate", "--check", "--database-url", url).returncode == 0
