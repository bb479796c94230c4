"""Benchmark 3, memory: the RSS of one server process over a million accepted events.

    python bench/memory.py                      # 1,000,000 events on SQLite: ~15 min
    python bench/memory.py --events 200000      # a shorter curve
    python bench/memory.py --backend postgres   # the same on PostgreSQL
    python bench/memory.py --smoke              # seconds; what CI runs to keep this working

`hookinbox serve --no-worker` (one process, pinned to the first CPU) receives distinct signed
Stripe deliveries from wrk (one thread, 64 connections, pinned to the last CPU). Deliveries
are signed in rounds of at most `--round` right before they are sent (a signature is valid for
5 minutes); each is sent once (`memory_requests.lua`). After the first `--first` events, then
every `--every`, with the server idle, the bench reads the process's /proc/PID/status: VmRSS
(resident now), VmHWM (the peak so far), RssAnon (heap: what a leak grows) and RssFile
(mapped files, e.g. prometheus_client's multiprocess counters). Events are counted in the
database, not from wrk's answers. Target: VmRSS after all events within 10% of VmRSS after
the first 10,000. Raw JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa

from bench._common import (
    BENCH,
    database,
    hookinbox_serve,
    parse_wrk,
    request_file,
    save,
    server,
)

APP = "bench.peers.hookinbox_app:inbox"
SCRIPT = BENCH / "memory_requests.lua"
FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")


def status(pid: int) -> dict[str, float]:
    """The memory lines of /proc/PID/status, in MiB."""
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in FIELDS:
            found[name] = int(value.split()[0]) / 1024  # kB
    return found


def stored(engine: sa.Engine, query: str = "SELECT COUNT(*) FROM hookinbox_events") -> int:
    with engine.connect() as connection:
        return int(connection.execute(sa.text(query)).scalar_one() or 0)


def send(
    url: str, engine: sa.Engine, count: int, *, connections: int, seconds: int, cpu: int
) -> dict[str, Any]:
    """`count` fresh deliveries, signed now, each sent once by wrk pinned to `cpu`; wrk is
    stopped (SIGINT) as soon as the database holds them all, or after `seconds`."""
    started = time.monotonic()
    requests = request_file(count)
    signed = time.monotonic() - started
    # MAX(id) is an index probe where COUNT(*) reads a million rows: ids have no gaps here
    # (distinct deliveries, no conflicts), so it tells when the last one has landed.
    target = stored(engine, "SELECT MAX(id) FROM hookinbox_events") + count
    try:
        wrk = subprocess.Popen(
            [
                "taskset",
                "-c",
                str(cpu),
                "wrk",
                "-t",
                "1",
                "-c",
                str(min(connections, count)),
                "-d",
                f"{seconds}s",
                "--latency",
                "-s",
                str(SCRIPT),
                url,
                "--",
                str(requests),
                "1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + seconds
        while wrk.poll() is None and time.monotonic() < deadline:
            time.sleep(0.25)
            if stored(engine, "SELECT MAX(id) FROM hookinbox_events") >= target:
                break
        if wrk.poll() is None:
            wrk.send_signal(signal.SIGINT)  # wrk prints its statistics and exits
        output, errors = wrk.communicate(timeout=60)
    finally:
        requests.unlink()
    if wrk.returncode != 0:
        raise RuntimeError(f"wrk failed: {errors[-2000:]}")
    return {"deliveries": count, "signing_seconds": signed, "wrk": parse_wrk(output)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--first", type=int, default=10_000, help="the reference sample")
    parser.add_argument("--every", type=int, default=100_000, help="then a sample every ...")
    parser.add_argument("--round", type=int, default=100_000, help="deliveries signed at once")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument(
        "--round-seconds",
        type=int,
        default=240,
        help="wrk's time limit per round (signatures expire after 300 s)",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes")
    args = parser.parse_args()
    if args.smoke:
        args.events, args.first, args.every, args.round = 3_000, 500, 1_000, 1_000
    if shutil.which("wrk") is None or shutil.which("taskset") is None:
        raise SystemExit("needs wrk and taskset (Debian: apt-get install wrk util-linux)")
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, load_cpu = cpus[0], cpus[-1]
    checkpoints = [args.first, *range(args.every, args.events + 1, args.every)]
    checkpoints = sorted({c for c in checkpoints if c <= args.events} | {args.events})
    samples: list[dict[str, Any]] = []
    rounds: list[dict[str, Any]] = []
    began = time.monotonic()
    with database(args.backend) as url:
        command = ["taskset", "-c", str(server_cpu), *hookinbox_serve(APP, url, 1)]
        engine = sa.create_engine(
            url.replace("postgresql://", "postgresql+psycopg://", 1), poolclass=sa.NullPool
        )
        with server(command) as running:
            pid = running.process.pid  # taskset execs the server: same process
            os.sched_setaffinity(0, {load_cpu})  # this process polls: keep off the server's CPU
            target = f"{running.base_url}/webhooks/stripe"
            samples.append({"events": 0, "seconds": 0.0, **status(pid)})
            accepted = 0
            for checkpoint in checkpoints:
                while accepted < checkpoint:
                    count = min(args.round, checkpoint - accepted)
                    sent = send(
                        target,
                        engine,
                        count,
                        connections=args.connections,
                        seconds=args.round_seconds,
                        cpu=load_cpu,
                    )
                    before, accepted = accepted, stored(engine)
                    sent["stored"] = accepted - before
                    rounds.append(sent)
                    if accepted == before:
                        raise RuntimeError(f"nothing stored in a round: {sent}")
                sample = {"events": accepted, "seconds": time.monotonic() - began, **status(pid)}
                samples.append(sample)
                print(
                    f"{accepted:>9} events  {sample['seconds']:6.0f} s  "
                    f"VmRSS {sample['VmRSS']:6.1f} MiB  VmHWM {sample['VmHWM']:6.1f} MiB  "
                    f"RssAnon {sample['RssAnon']:6.1f} MiB",
                    file=sys.stderr,
                    flush=True,
                )
        engine.dispose()
    elapsed = time.monotonic() - began
    reference = next(s for s in samples if s["events"] >= args.first)
    final = samples[-1]
    ratio = final["VmRSS"] / reference["VmRSS"]
    peak_ratio = final["VmHWM"] / reference["VmRSS"]
    errors = sum(r["wrk"].errors for r in rounds)
    lines = [
        "| events | elapsed s | VmRSS MiB | VmHWM (peak) MiB | RssAnon MiB | RssFile MiB | "
        "vs first |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in samples:
        lines.append(
            f"| {s['events']:,} | {s['seconds']:.0f} | {s['VmRSS']:.1f} | {s['VmHWM']:.1f} | "
            f"{s['RssAnon']:.1f} | {s['RssFile']:.1f} | {s['VmRSS'] / reference['VmRSS']:.3f} |"
        )
    rate = final["events"] / sum(r["wrk"].seconds for r in rounds)
    lines.append(
        f"\n{args.backend}, 1 server process: VmRSS after {final['events']:,} events / after "
        f"{reference['events']:,} = {ratio:.3f} (target <= 1.10); peak / after "
        f"{reference['events']:,} = {peak_ratio:.3f}; {rate:.0f} events/s while sending; "
        f"{errors} errors; {elapsed / 60:.1f} min"
    )
    path = save(
        "memory",
        {
            "settings": vars(args),
            "samples": samples,
            "rounds": rounds,
            "ratio": ratio,
            "peak_ratio": peak_ratio,
            "wall_seconds": elapsed,
        },
    )
    print("\n".join(lines))
    print(f"\nraw results: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
