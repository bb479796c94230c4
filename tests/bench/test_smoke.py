"""The benchmarks keep working: each runs at its smoke size (seconds, no wrk; SQLite, and
PostgreSQL or MariaDB where a test names its server).

No figure is asserted (timings on a shared machine prove nothing); what is checked is that each
benchmark runs to the end, measures every peer it was asked for, and that the exactly-once
check inside the ingest benchmark finds hookinbox's effects undoubled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_bench(script: str, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """Run `bench/<script>` and return the raw results it saved."""
    result = subprocess.run(
        [sys.executable, f"bench/{script}", "--smoke", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    saved = [line for line in result.stderr.splitlines() if "raw results: " in line]
    assert saved, result.stderr[-2000:]
    path = Path(saved[-1].split("raw results: ", 1)[1].split(" (")[0])
    document: dict[str, object] = json.loads(path.read_text())
    path.unlink()
    return document


def test_ingest_benchmark_runs_and_counts_doubled_effects() -> None:
    document = run_bench(
        "ingest.py", "--backends", "sqlite", "--workers", "1", "--peers", "hookinbox,bare"
    )
    rows = document["results"]
    assert isinstance(rows, list)
    assert {r["peer"] for r in rows} == {"ceiling", "hookinbox", "bare"}  # the ceiling always
    assert all(r["rate"]["median"] > 0 for r in rows)
    doubled = {d["peer"]: d for d in document["doubled"]}  # type: ignore[attr-defined]
    assert doubled["hookinbox"]["doubled"] == 0
    assert doubled["hookinbox"]["effects"] == doubled["hookinbox"]["events"]


def test_processing_benchmark_runs_and_samples_the_backlog_under_load() -> None:
    document = run_bench("processing.py", "--backends", "sqlite")
    (result,) = document["results"]  # type: ignore[misc]
    assert {"drain", "bare", "moderate", "idle", "mixed"} <= result.keys()
    mixed = result["mixed"]
    assert mixed["ceiling"]["measured"] and mixed["ceiling"]["rate"] > 0
    (configuration,) = mixed["configurations"]
    (run,) = configuration["runs"]
    assert run["accepted_rate"] > 0 and run["processed_rate"] > 0
    assert set(run["backlog"]) == {"25%", "50%", "75%", "100%"}
    assert len(run["series"]) >= 3 and isinstance(run["bounded"], bool)


def test_ingest_and_processing_benchmarks_run_on_mariadb(mysql_server: str) -> None:
    """`--backends mysql`: hookinbox and the bare peer store on MariaDB (PyMySQL), the workers
    and the bare loop drain it, and the exactly-once check finds nothing doubled."""
    env = {"HOOKINBOX_BENCH_MYSQL_URL": mysql_server}
    document = run_bench(
        "ingest.py", "--backends", "mysql", "--workers", "1", "--peers", "hookinbox,bare", env=env
    )
    rows = document["results"]
    assert isinstance(rows, list)
    assert {(r["backend"], r["peer"]) for r in rows} == {
        ("mysql", "ceiling"),
        ("mysql", "hookinbox"),
        ("mysql", "bare"),
    }
    assert all(r["rate"]["median"] > 0 and r["errors"] == 0 for r in rows)
    (doubled,) = document["doubled"]  # type: ignore[misc]
    assert doubled["doubled"] == 0 and doubled["effects"] == doubled["events"]

    document = run_bench("processing.py", "--backends", "mysql", env=env)
    (result,) = document["results"]  # type: ignore[misc]
    assert {"drain", "bare", "moderate", "idle", "mixed"} <= result.keys()
    assert result["bare"]["correct"] and all(d["correct"] for d in result["drain"])
    (configuration,) = result["mixed"]["configurations"]
    assert configuration["runs"][0]["processed_rate"] > 0


@pytest.mark.parametrize(
    ("script", "args"),
    [
        ("growth.py", ("--backend", "sqlite")),
        ("memory.py", ()),
        ("signature_header.py", ()),
        ("signature_candidates.py", ()),
    ],
)
def test_benchmark_runs_at_smoke_size(script: str, args: tuple[str, ...]) -> None:
    document = run_bench(script, *args)
    assert document["benchmark"] == script.removesuffix(".py")


def test_capacity_benchmark_measures_cpu_per_event(postgres_template: str) -> None:
    """PostgreSQL and wrk: the test run has both (CI installs wrk)."""
    from tests.conftest import POSTGRES_URL

    document = run_bench("capacity.py", env={"HOOKINBOX_BENCH_POSTGRES_URL": POSTGRES_URL})
    (run,) = document["runs"]  # type: ignore[misc]
    assert run["deliveries"] > 0 and run["events"] >= run["deliveries"]
    assert run["ingest_app_ms"] > 0 and run["process_app_ms"] > 0
    assert run["ingest_db_ms"] > 0 and run["process_db_ms"] > 0


def test_heap_only_benchmark_reads_what_processing_cost(postgres_template: str) -> None:
    """PostgreSQL: schema 8's drain (the baseline, checked out from git) updates no row in
    place; this tree's, at schema 10's fill factors, every one."""
    from tests.conftest import POSTGRES_URL

    document = run_bench("heap_only.py", env={"HOOKINBOX_BENCH_POSTGRES_URL": POSTGRES_URL})
    for size in document["sizes"]:  # type: ignore[attr-defined]
        sides = size["sides"]
        assert sides["baseline"]["updates"] > 0 and sides["baseline"]["hot_share"] == 0
        ours = sides["this tree (fill 50:30)"]
        assert ours["events"] == 300 and ours["wal_per_event"] > 0
        assert ours["hot_share"] >= 0.9, ours["tables"]


def test_the_ingest_profile_groups_samples_by_part_of_the_delivery_path() -> None:
    """`bench/profile_ingest.py` (py-spy and wrk, run by hand): its grouping of stacks."""
    from bench.profile_ingest import OTHER, WRITER, part_of

    uvicorn = "thread (1): MainThread;run_asgi (uvicorn/protocols/http/httptools_impl.py:420)"
    app = f"{uvicorn};WebhookApp.__call__ (hookinbox/http/_app.py:214)"
    assert part_of(f"{app};answer (x);BaseReceiver.verify (hookinbox/_receiver.py:221)") == (
        "verify and identify"
    )
    # uvicorn's own send, under hookinbox's send_reply, is the answer being sent
    sent = f"{app};send_reply (x);send_body (x);RequestResponseCycle.send (uvicorn/x.py:522)"
    assert part_of(sent) == "sending the answer (uvicorn's send)"
    assert part_of(uvicorn) == "uvicorn's HTTP protocol and task"
    writer = "thread (2): hookinbox-group-commit-0;_run (x);record_deliveries (x)"
    assert part_of(writer) == WRITER
    assert part_of("thread (3): hookinbox-metrics;sleep (x)") == OTHER


def test_async_worker_benchmark_drains_on_both_workers(postgres_template: str) -> None:
    """PostgreSQL: the thread worker, the async worker on asyncpg and on psycopg's async
    mode, and the bare asyncpg loop, each drain complete and correct."""
    from tests.conftest import POSTGRES_URL

    document = run_bench(
        "async_worker.py", "--psycopg-async", env={"HOOKINBOX_BENCH_POSTGRES_URL": POSTGRES_URL}
    )
    (result,) = document["results"]  # type: ignore[misc]
    assert set(result["drain"]) == {"sync", "async", "psycopg_async"}
    assert all(drain["correct"] for drain in result["drain"].values())
    assert result["bare_async"]["correct"]
    assert all(idle["p50_ms"]["median"] > 0 for idle in result["idle"].values())


def test_space_benchmark_reads_bytes_and_heap_only_updates(postgres_template: str) -> None:
    """PostgreSQL: the example shop through serve, a worker and a relay on main and on this
    tree; every event stored, processed and its receipt relayed, and the outbox's updates
    heap-only on this tree (schema 15)."""
    from tests.conftest import POSTGRES_URL

    document = run_bench("space.py", env={"HOOKINBOX_BENCH_POSTGRES_URL": POSTGRES_URL})
    baseline, ours = document["sides"]  # type: ignore[misc]
    for side in (baseline, ours):
        assert side["events"] == side["messages"] == 300
        assert side["sizes"]["hookinbox_events"]["total"] > 0
    relayed = ours["updates"]["relay"]
    assert relayed["hookinbox_outbox"]["updated"] >= 300
    assert relayed["hookinbox_outbox"]["hot"] >= 0.9 * relayed["hookinbox_outbox"]["updated"]


def test_payload_bytes_benchmark_measures_every_format() -> None:
    """SQLite: each stored format measured; compressed payloads are the smaller."""
    results = run_bench("payload_bytes.py")["results"]["sqlite"]  # type: ignore[index]
    assert set(results) == {"clear", "zlib", "encrypted", "zlib + encrypted"}
    assert results["zlib"]["stored"] < 0.7 * results["clear"]["stored"]
    assert results["encrypted"]["stored"] > results["clear"]["stored"]


def test_relay_brokers_benchmark_runs_every_kind(rabbitmq_url: str, nats_url: str) -> None:
    """Each destination kind relays every message once (checked inside), same run."""
    env = {"HOOKINBOX_BENCH_RABBITMQ_URL": rabbitmq_url, "HOOKINBOX_BENCH_NATS_URL": nats_url}
    document = run_bench("relay_brokers.py", env=env)
    results = document["results"]
    assert isinstance(results, dict)
    assert set(results) == {"http", "rabbitmq", "jetstream"}
    assert all(figures["median"] > 0 for figures in results.values())
