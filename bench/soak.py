"""Soak: hours of steady, duplicated traffic with processes killed, and nothing may drift.

    python bench/soak.py --backend sqlite --duration 3600 --rate 50 --duplicates 0.01 \\
        --kill-every 300 --sample-every 60          # an hour (the default settings)
    python bench/soak.py --duration 180 --sample-every 30 --kill-every 60   # a 4-minute look

`hookinbox serve` of the example shop (`hookinbox.examples.shop:inbox`: 2 HTTP server
processes, its worker and outbox relay) runs on a fresh database. The simulator sends signed
Stripe deliveries at `--rate` events/s, open loop: each sample interval's events are one plan
(seed `--seed` + interval number), with `--duplicates` of the events delivered again and the
simulator's other defaults (bursts, lost responses, out-of-order updates, forged, expired and
malformed deliveries, each 0.2-1%); a delivery not acknowledged is retried on Stripe's
schedule compressed 1000 times. Every `--kill-every` seconds (offset by half a sample
interval, so that no sample falls on the instant of a kill) one process of the serve tree gets
SIGKILL, a worker and an HTTP server process in turn (`--kill-target`); serve's supervisor
restarts a worker, uvicorn's a server process, and the bench waits to see the new one.

Each `--sample-every` seconds it prints one row: deliveries answered in that interval by
class, the p50/p99 acknowledgement latency (request sent to 2xx answer read, 2xx answers
only), the summed VmRSS of every process of the serve tree, and the kills. At the end, once
the worker has drained, the simulator's exactly-once check (`hookinbox.simulate.verify`)
compares every acknowledged event with the inbox's rows and the shop's orders.

Verdict (exit 0 only if every line holds):
- RSS flat: after `--warmup` samples, the median of the last third of the samples is at most
  `--flat-ratio` (1.25) times the median of the first third;
- p99 flat: the same for the p99 latency, with `--p99-slack-ms` (10 ms) of absolute allowance,
  since a millisecond of jitter on a shared machine is not growth;
- exactly once: lost 0, doubled 0, nothing invalid accepted, every acknowledged event
  processed;
- every killed process was replaced within 60 s.
Raw JSON under bench/results/. Not part of CI (tests/reliability/test_soak_smoke.py runs 15 s).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from bench._common import SECRET, database, hookinbox_serve, save, server
from hookinbox.simulate import (
    Latency,
    SimulationConfig,
    SimulationReport,
    run_simulation,
    verify,
    wait_until_drained,
)
from hookinbox.simulate._sender import DeliveryResult

APP = "hookinbox.examples.shop:inbox"
RETRY_TAIL = 30.0
"""Seconds an interval's plan may keep retrying after its last first delivery (Stripe's
compressed schedule retries 5 times within 30 s)."""
RESTART_TIMEOUT = 60.0
EXIT_FAILED = 1


# -- the serve process tree ----------------------------------------------------------------


def tree(root: int) -> list[int]:
    """`root` and every descendant (uvicorn's server processes, the worker)."""
    found: list[int] = []
    pending = [root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                pending += [int(child) for child in (task / "children").read_text().split()]
            except (FileNotFoundError, ProcessLookupError):
                continue
    return found


def role(pid: int) -> str:
    """worker, server (a uvicorn server process) or other (the serve process, helpers)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return "gone"
    if b"hookinbox" in argv and b"worker" in argv:
        return "worker"
    if any(b"spawn_main" in part for part in argv):  # multiprocessing's spawned child
        return "server"
    return "other"


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total / 1024


# -- what is measured ----------------------------------------------------------------------


@dataclass
class Sample:
    at: float
    """Seconds since the start of the load."""
    answered: dict[str, int]
    p50_ms: float | None
    p99_ms: float | None
    rss_mib: float
    processes: int
    load: float
    """The machine's 1-minute load average: p99 that climbs with it is the machine's."""
    kills: list[str]


@dataclass
class Kill:
    at: float
    role: str
    pid: int
    replaced_after: float | None = None
    """Seconds until a new process of the same role ran; None if none did in time."""


@dataclass
class Run:
    started: float = field(default_factory=time.monotonic)
    finished: list[tuple[float, DeliveryResult]] = field(default_factory=list)
    reports: list[SimulationReport] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def answer_class(result: DeliveryResult) -> str:
    if result.status is None:
        return "lost" if result.failure == "lost" else "no answer"
    if 200 <= result.status < 300:
        return "2xx"
    return "503" if result.status == 503 else f"{result.status // 100}xx"


# -- the load, the kills, the samples ------------------------------------------------------


async def send_interval(args: argparse.Namespace, target: str, number: int, run: Run) -> None:
    """One interval's events as one simulator plan, retried until acknowledged or cut."""
    config = SimulationConfig(
        provider="stripe",
        secret=SECRET,
        target=target,
        events=max(1, round(args.rate * args.sample_every)),
        rate=args.rate,
        seed=args.seed + number,
        duration=args.sample_every + RETRY_TAIL,
        duplicate_rate=args.duplicates,
        out_of_order_rate=args.out_of_order,
        concurrency=16,
    )
    report = await run_simulation(
        config,
        progress=False,
        on_result=lambda result: run.finished.append((run.elapsed(), result)),
    )
    run.reports.append(report)


async def drive(args: argparse.Namespace, target: str, run: Run) -> None:
    """Start each interval's plan on time; wait for the last one's retries."""
    intervals = max(1, round(args.duration / args.sample_every))
    tasks = []
    for number in range(intervals):
        await asyncio.sleep(max(0.0, number * args.sample_every - run.elapsed()))
        tasks.append(asyncio.create_task(send_interval(args, target, number, run)))
    await asyncio.gather(*tasks)


async def kill_periodically(args: argparse.Namespace, root: int, run: Run) -> None:
    targets = ["worker", "server"] if args.kill_target == "both" else [args.kill_target]
    offset = args.sample_every / 2
    number = 0
    while (number + 1) * args.kill_every + offset < args.duration:
        number += 1
        await asyncio.sleep(max(0.0, number * args.kill_every + offset - run.elapsed()))
        wanted = targets[(number - 1) % len(targets)]
        victims = [pid for pid in tree(root) if role(pid) == wanted]
        if not victims:
            run.kills.append(Kill(run.elapsed(), wanted, 0))  # nothing to kill: a failure
            continue
        kill = Kill(run.elapsed(), wanted, victims[0])
        run.kills.append(kill)
        os.kill(kill.pid, signal.SIGKILL)
        deadline = time.monotonic() + RESTART_TIMEOUT
        while time.monotonic() < deadline:
            now = [pid for pid in tree(root) if role(pid) == wanted]
            if len(now) >= len(victims) and kill.pid not in now:
                kill.replaced_after = run.elapsed() - kill.at
                break
            await asyncio.sleep(0.1)


def window(run: Run, start: float, end: float) -> tuple[dict[str, int], Latency | None]:
    results = [r for at, r in run.finished if start <= at < end]
    answered = Counter(answer_class(r) for r in results)
    acks = [r.latency for r in results if r.accepted and r.latency is not None]
    return dict(answered), Latency.of(acks)


COLUMNS = ("t s", "2xx", "503", "4xx", "no answer", "p50 ms", "p99 ms", "RSS MiB", "procs", "load")


def row_text(sample: Sample, warmup: bool) -> str:
    a = sample.answered

    def ms(value: float | None) -> str:
        return f"{value:.1f}" if value is not None else "-"

    cells = (
        f"{sample.at:.0f}",
        str(a.get("2xx", 0)),
        str(a.get("503", 0)),
        str(sum(n for k, n in a.items() if k.startswith("4"))),
        str(a.get("no answer", 0)),
        ms(sample.p50_ms),
        ms(sample.p99_ms),
        f"{sample.rss_mib:.1f}",
        str(sample.processes),
        f"{sample.load:.1f}",
    )
    line = " ".join(f"{cell:>9}" for cell in cells)
    notes = [f"killed {k}" for k in sample.kills] + (["warm-up"] if warmup else [])
    return line + ("  " + ", ".join(notes) if notes else "")


async def sample_periodically(
    args: argparse.Namespace, root: int, run: Run, console: Console
) -> None:
    console.print(" ".join(f"{c:>9}" for c in COLUMNS), style="bold", soft_wrap=True)
    number = 0
    while number * args.sample_every < args.duration:
        number += 1
        end = number * args.sample_every
        await asyncio.sleep(max(0.0, end - run.elapsed()))
        start = end - args.sample_every
        answered, latency = window(run, start, end)
        pids = tree(root)
        sample = Sample(
            at=end,
            answered=answered,
            p50_ms=latency.p50 * 1000 if latency else None,
            p99_ms=latency.p99 * 1000 if latency else None,
            rss_mib=rss_mib(pids),
            processes=len(pids),
            load=os.getloadavg()[0],
            kills=[k.role for k in run.kills if start <= k.at < end],
        )
        run.samples.append(sample)
        console.print(row_text(sample, warmup=number <= args.warmup), soft_wrap=True)


async def soak(args: argparse.Namespace, target: str, root: int, console: Console) -> Run:
    run = Run()
    await asyncio.gather(
        drive(args, target, run),
        kill_periodically(args, root, run),
        sample_periodically(args, root, run, console),
    )
    return run


# -- the verdict ---------------------------------------------------------------------------


@dataclass
class Flatness:
    first: float | None
    last: float | None
    limit: float | None
    flat: bool
    reason: str


def flatness(values: list[float | None], ratio: float, slack: float = 0.0) -> Flatness:
    """Is the median of the last third within `ratio` (or `slack`) of the first third's?

    `values` are the samples after the warm-up; at least two are needed to judge.
    """
    if len(values) < 2 or any(v is None for v in values):
        why = "fewer than 2 samples" if len(values) < 2 else "a sample has no value"
        return Flatness(None, None, None, False, why)
    known = [float(v) for v in values if v is not None]
    third = max(1, len(known) // 3)
    first = statistics.median(known[:third])
    last = statistics.median(known[-third:])
    limit = max(first * ratio, first + slack)
    return Flatness(first, last, limit, last <= limit, f"last {last:.1f} vs limit {limit:.1f}")


@dataclass
class Verdict:
    rss: Flatness
    p99: Flatness
    acknowledged: int
    lost: int
    doubled: int
    invalid_accepted: int
    problems: list[str]
    kills: int
    restarts: int

    @property
    def ok(self) -> bool:
        return (
            self.rss.flat
            and self.p99.flat
            and self.lost == 0
            and self.doubled == 0
            and self.invalid_accepted == 0
            and not self.problems
            and self.restarts == self.kills
        )


def judge(args: argparse.Namespace, run: Run, database_url: str) -> Verdict:
    judged = run.samples[args.warmup :]
    checks = [verify(report, database_url) for report in run.reports]
    problems = [problem for check in checks for problem in check.problems]
    return Verdict(
        rss=flatness([s.rss_mib for s in judged], args.flat_ratio),
        p99=flatness([s.p99_ms for s in judged], args.flat_ratio, args.p99_slack_ms),
        acknowledged=sum(check.expected for check in checks),
        lost=sum(check.lost for check in checks),
        doubled=sum(check.doubled for check in checks),
        invalid_accepted=sum(check.invalid_accepted for check in checks),
        problems=problems,
        kills=len(run.kills),
        restarts=sum(1 for k in run.kills if k.replaced_after is not None),
    )


def render(verdict: Verdict, console: Console) -> None:
    table = Table(title="Soak verdict", title_justify="left")
    table.add_column("check")
    table.add_column("result")
    table.add_column("holds")

    def mark(ok: bool) -> str:
        return "[green]yes[/green]" if ok else "[red]NO[/red]"

    for name, flat in (("RSS MiB", verdict.rss), ("p99 ms", verdict.p99)):
        figures = (
            f"first third {flat.first:.1f}, last third {flat.last:.1f} (limit {flat.limit:.1f})"
            if flat.first is not None and flat.last is not None and flat.limit is not None
            else flat.reason
        )
        table.add_row(f"{name} flat", figures, mark(flat.flat))
    exact = verdict.lost == verdict.doubled == verdict.invalid_accepted == 0
    table.add_row(
        "exactly once",
        f"{verdict.acknowledged:,} acknowledged: lost {verdict.lost}, doubled {verdict.doubled},"
        f" invalid accepted {verdict.invalid_accepted}",
        mark(exact and not verdict.problems),
    )
    for problem in verdict.problems:
        table.add_row("", f"[red]{problem}[/red]", "")
    table.add_row(
        "kills replaced",
        f"{verdict.restarts} of {verdict.kills}",
        mark(verdict.restarts == verdict.kills),
    )
    console.print(table)


def markdown(run: Run, args: argparse.Namespace) -> str:
    lines = ["| t s | 2xx | 503 | 4xx | no answer | p50 ms | p99 ms | RSS MiB | load | kills |"]
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for number, s in enumerate(run.samples, start=1):
        a = s.answered
        warm = " (warm-up)" if number <= args.warmup else ""
        p50 = f"{s.p50_ms:.1f}" if s.p50_ms is not None else "-"
        p99 = f"{s.p99_ms:.1f}" if s.p99_ms is not None else "-"
        four = sum(n for k, n in a.items() if k.startswith("4"))
        lines.append(
            f"| {s.at:.0f}{warm} | {a.get('2xx', 0)} | {a.get('503', 0)} | {four} | "
            f"{a.get('no answer', 0)} | {p50} | {p99} | {s.rss_mib:.1f} | {s.load:.1f} | "
            f"{', '.join(s.kills) or '-'} |"
        )
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--duration", type=float, default=3600, help="seconds of load")
    parser.add_argument("--rate", type=float, default=50, help="events per second")
    parser.add_argument("--duplicates", type=float, default=0.01, help="share delivered again")
    parser.add_argument(
        "--out-of-order", type=float, default=0.01, help="share of updates sent first"
    )
    parser.add_argument("--kill-every", type=float, default=300, help="seconds; 0: never")
    parser.add_argument("--kill-target", default="both", choices=["both", "worker", "server"])
    parser.add_argument("--sample-every", type=float, default=60, help="seconds per row")
    parser.add_argument("--warmup", type=int, default=1, help="samples left out of the verdict")
    parser.add_argument("--flat-ratio", type=float, default=1.25)
    parser.add_argument("--p99-slack-ms", type=float, default=10.0)
    parser.add_argument("--server-processes", type=int, default=2)
    parser.add_argument(
        "--lease-seconds", type=float, default=10, help="how soon a killed worker's events return"
    )
    parser.add_argument("--drain-timeout", type=float, default=300)
    parser.add_argument("--seed", type=int, default=None, help="interval n uses seed + n")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**31)
    if args.kill_every <= 0:
        args.kill_every = float("inf")
    if (
        args.kill_target != "worker"
        and args.server_processes < 2
        and args.kill_every < args.duration
    ):
        parser.error("killing a server process needs --server-processes 2 or more (with one, "
                     "the server is the serve process itself and nothing restarts it)")  # fmt: skip
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    console = Console(stderr=True)
    began = time.monotonic()
    with database(args.backend) as url:
        command = [*hookinbox_serve(APP, url, args.server_processes, worker=True),
                   "--lease-seconds", str(args.lease_seconds)]  # fmt: skip
        env = {"STRIPE_WEBHOOK_SECRET": SECRET}
        with server(command, env=env, ready_path="/readyz") as running:
            console.print(
                f"soak: {args.backend}, {args.rate:g} events/s for {args.duration:g} s, "
                f"duplicates {args.duplicates:g}, kill every {args.kill_every:g} s, "
                f"seed {args.seed}; serve log {running.log}",
                soft_wrap=True,
            )
            target = f"{running.base_url}/webhooks/stripe"
            run = asyncio.run(soak(args, target, running.process.pid, console))
            drained = wait_until_drained(url, args.drain_timeout)
            console.print(f"drained: {drained} ({run.elapsed():.0f} s after the start)")
            verdict = judge(args, run, url)
    render(verdict, console)
    print(markdown(run, args))
    settings = {k: (v if v != float("inf") else None) for k, v in vars(args).items()}
    path = save(
        "soak",
        {
            "settings": settings,
            "deliveries": len(run.finished),
            "samples": [asdict(s) for s in run.samples],
            "kills": [asdict(k) for k in run.kills],
            "verdict": {**asdict(verdict), "ok": verdict.ok},
            "wall_seconds": time.monotonic() - began,
        },
    )
    print(f"\nraw results: {path} ({time.monotonic() - began:.0f} s)", file=sys.stderr)
    return 0 if verdict.ok else EXIT_FAILED


if __name__ == "__main__":
    raise SystemExit(main())
