"""The soak command keeps working: `bench/soak.py` for 15 s, one HTTP server process killed.

It runs the real thing at a small size (`hookinbox serve` of the example shop on SQLite, the
simulator at 50 events/s with 1% duplicates, 5-s samples, one SIGKILL) and checks what the
command reports and how it exits: three samples with acknowledged deliveries and a memory
figure, the killed process replaced, and the simulator's verify finding lost 0 and doubled 0.
Flatness is judged with loose bounds here (15 s on a shared machine measures noise, not
drift); the rules that judge it are checked on their own below, where they can be made to fail.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bench.soak import flatness

from hookinbox.cli import _supervise
from tests.reliability._report import Trial, record
from tests.support.server import ROOT

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

SMOKE = (
    "--backend", "sqlite", "--duration", "15", "--sample-every", "5", "--rate", "50",
    "--duplicates", "0.01", "--kill-every", "8", "--kill-target", "server",
    "--out-of-order", "0",  # a deferred update would wait 5 s or more for its retry
    "--flat-ratio", "10", "--p99-slack-ms", "5000", "--drain-timeout", "30",
)  # fmt: skip


def test_soak_runs_kills_samples_and_verifies_exactly_once() -> None:
    result = subprocess.run(
        [sys.executable, "bench/soak.py", *SMOKE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    saved = [line for line in result.stderr.splitlines() if "raw results: " in line]
    assert saved, result.stderr[-3000:]
    path = Path(saved[-1].split("raw results: ", 1)[1].split(" (")[0])
    document = json.loads(path.read_text())
    path.unlink()
    verdict = document["verdict"]
    assert result.returncode == 0, (verdict, result.stderr[-3000:])

    samples = document["samples"]
    assert [s["at"] for s in samples] == [5, 10, 15]
    assert all(s["answered"].get("2xx", 0) > 0 and s["p99_ms"] for s in samples), samples
    assert all(s["rss_mib"] > 0 and s["processes"] >= 4 for s in samples), samples
    kills = document["kills"]
    assert [k["role"] for k in kills] == ["server"], kills
    assert kills[0]["replaced_after"] is not None, kills
    assert verdict["acknowledged"] > 500, verdict
    assert verdict["lost"] == 0 and verdict["doubled"] == 0, verdict
    assert verdict["invalid_accepted"] == 0 and verdict["problems"] == [], verdict
    assert verdict["ok"] is True

    record(
        Trial(
            fault="soak (smoke): 15 s at 50 events/s, 1% duplicates, HTTP server SIGKILLed",
            backend="sqlite",
            deliveries=document["deliveries"],
            kills=len(kills),
            restarts=verdict["restarts"],
            lost=verdict["lost"],
            doubled=verdict["doubled"],
            detail=(
                f"{verdict['acknowledged']} events acknowledged; killed server process "
                f"replaced after {kills[0]['replaced_after']:.1f} s; answers per 5-s sample: "
                + "; ".join(
                    f"{s['answered']} p99 {s['p99_ms']:.0f} ms RSS {s['rss_mib']:.0f} MiB"
                    for s in samples
                )
            ),
        )
    )


def test_flatness_holds_for_a_level_series_and_fails_for_growth() -> None:
    assert flatness([100, 101, 99, 102, 100, 101], 1.25).flat
    growing = flatness([100, 110, 120, 140, 160, 180], 1.25)
    assert not growing.flat
    assert (growing.first, growing.last) == (105, 170)
    # Milliseconds of jitter pass with the absolute allowance, a real climb does not.
    assert flatness([2.0, 2.0, 3.0, 4.0, 4.0, 4.0], 1.25, slack=10).flat
    assert not flatness([2.0, 2.0, 3.0, 40.0, 40.0, 40.0], 1.25, slack=10).flat
    # Too little to judge is not "flat".
    assert not flatness([100], 1.25).flat
    assert not flatness([100, None, 100], 1.25).flat


def test_a_worker_that_ran_a_while_is_restarted_without_the_crash_loop_backoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """serve's supervisor doubled its wait after every death and never came back down, so a
    soak's periodic kills (or a week of rare OOM kills) found the worker restarted after 30 s.
    A worker that ran for `MAX_BACKOFF` before dying is not in a crash loop: the wait starts
    over. Real child processes; the constants are scaled down so the test takes seconds."""
    monkeypatch.setattr(_supervise, "FIRST_BACKOFF", 0.1)
    monkeypatch.setattr(_supervise, "MAX_BACKOFF", 2.0)
    runs = tmp_path / "runs"
    # Runs 0-2 die at once (a crash loop), run 3 lives 2.5 s (longer than MAX_BACKOFF).
    script = (
        f"n=$(cat {runs} 2>/dev/null || echo 0); echo $((n + 1)) > {runs}; "
        '[ "$n" -eq 3 ] && sleep 2.5; exit 1'
    )
    supervisor = _supervise.WorkerSupervisor(["sh", "-c", script], grace_period=1)
    with caplog.at_level(logging.ERROR, logger="hookinbox.serve"):
        supervisor.start()
        deadline = time.monotonic() + 30
        while supervisor.restarts < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        supervisor.stop()
        supervisor.join(timeout=10)
    waits = [
        float(match[1])
        for record in caplog.records
        if (match := re.search(r"restarting in ([\d.]+) s", record.getMessage()))
    ]
    assert waits[:5] == [0.1, 0.2, 0.4, 0.1, 0.2], waits
