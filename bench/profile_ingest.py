"""Where a saturated `hookinbox serve` spends its CPU: py-spy while wrk loads it.

    python bench/profile_ingest.py                      # PostgreSQL, 10 s
    python bench/profile_ingest.py --backend sqlite --seconds 20 --keep profile.txt
    python bench/profile_ingest.py --backend mysql     # MariaDB (HOOKINBOX_BENCH_MYSQL_URL)

Starts `hookinbox serve --no-worker` (one process) on a fresh database, loads it with wrk (64
connections) and records it with `py-spy record --gil` (only the thread holding the GIL is
sampled: the shares are of the server's Python CPU). Prints requests/s, the server's CPU per
request read from /proc (of each thread: the event loop, the group-commit writer), and the
samples grouped by part of the delivery path (`PARTS`). `--keep` saves py-spy's raw collapsed
stacks (feed them to any flame-graph tool). Needs `wrk` and `py-spy` (`pip install py-spy`);
py-spy needs to be allowed to read the server's memory (root, or ptrace permitted).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import database, fixed_rate, hookinbox_serve, request_file, server, wrk

APP = "bench.peers.hookinbox_app:inbox"
PARTS = (
    # (part, substrings of a frame that put a sample in it); the first part in this order with
    # a frame in the sample wins. The writer is told by its thread name.
    ("metrics (counting deliveries)", ("count_delivery", "observe_batch", "_Tally")),
    ("verify and identify", ("BaseReceiver.verify", "_verify.py", "normalize_raw_headers")),
    ("the reply, its log line and spans", ("Receiver.conclude", "finish_verified", "_report.py")),
    (
        "body read and deadlines",
        ("read_body", "receive_within", "within.", "Timeout.", "CancelScope"),
    ),
    (
        "waiting for the commit",
        ("submit_async", "wrap_future", "wait_for", "_resolve (", "_chain_future"),
    ),
    ("sending the answer (uvicorn's send)", ("send_reply", "send_body")),
    ("uvicorn's HTTP protocol and task", ("httptools_impl", "uvicorn")),
    ("granian's ASGI callbacks", ("granian",)),
)
WRITER = "the group-commit writer thread"
OTHER = "other"


def part_of(stack: str) -> str:
    # With --subprocesses, py-spy names the processes first (serve, then granian's worker).
    frames = [frame for frame in stack.split(";") if not frame.startswith("process ")]
    if "group-commit" in frames[0]:
        return WRITER
    for part, markers in PARTS:  # in order: uvicorn's own frames surround every other part
        if any(marker in frame for frame in frames for marker in markers):
            return part
    return OTHER


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of `pid`, by thread id and name."""
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        found[tid] = (int(fields[11]) + int(fields[12])) / ticks
    return found


def threads_cpu(pids: list[int]) -> dict[str, float]:
    """`thread_cpu` of each process."""
    return {f"{pid}/{tid}": used for pid in pids for tid, used in thread_cpu(pid).items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", default="postgres", choices=("postgres", "sqlite", "mysql"))
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--keep", type=Path, help="save py-spy's raw collapsed stacks here")
    parser.add_argument("--server", help="serve's --server (uvicorn, granian); serve's default")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise SystemExit("py-spy is not installed: pip install py-spy")
    raw = args.keep or Path(tempfile.mkstemp(suffix=".txt")[1])
    command = hookinbox_serve(APP, "{url}", 1) + (["--server", args.server] if args.server else [])
    with (
        database(args.backend) as url,
        server(
            [p.replace("{url}", url) for p in command], env={"BENCH_DATABASE_URL": url}
        ) as running,
    ):
        target = f"{running.base_url}/webhooks/stripe"
        warmup = request_file(300)
        fixed_rate(target, warmup, rate=100, seconds=2)
        warmup.unlink()
        requests = request_file(max(20_000, 9_000 * args.seconds))
        pid = running.process.pid
        recorder = subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--gil", "--threads", "--subprocesses",
             "--rate", "250", "--duration", str(args.seconds), "--format", "raw", "-o", str(raw)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(0.5)
        pids = running.pids  # granian serves in a child process
        before, started = threads_cpu(pids), time.monotonic()
        load = wrk(target, requests, seconds=args.seconds)
        after, elapsed = threads_cpu(pids), time.monotonic() - started
        recorder.wait()
        requests.unlink()
    served = load.rate * elapsed
    per_request = (sum(after.values()) - sum(before.values())) / served * 1e6
    print(f"{args.backend}: {load.rate:.0f} requests/s, p99 {load.p99_ms:.1f} ms; server CPU "
          f"{per_request:.0f} us per request")  # fmt: skip
    for tid, seconds in sorted(after.items(), key=lambda item: before.get(item[0], 0) - item[1]):
        used = seconds - before.get(tid, 0.0)
        if used > 0.05 * elapsed:
            print(f"  thread {tid} (process/thread): {used / served * 1e6:.0f} us per request")
    samples: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        samples[part_of(stack)] += int(count)
    total = sum(samples.values()) or 1
    print(f"py-spy --gil, {total} samples:")
    for part in (*(name for name, _ in PARTS), WRITER, OTHER):
        print(f"  {samples[part] / total * 100:5.1f} %  {part}")
    if args.keep is None:
        raw.unlink()


if __name__ == "__main__":
    main()
