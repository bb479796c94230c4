"""Same-run A/B of ingest: two checkouts (or two servers) measured in alternating runs.

    python bench/ab_ingest.py --variant main=/work/main --variant new=.   # two trees
    python bench/ab_ingest.py --variant uvicorn=.:uvicorn --variant granian=.:granian
    python bench/ab_ingest.py --backends sqlite --rounds 5 --seconds 10
    python bench/ab_ingest.py --variant clear=. --variant encrypted=. --encrypted encrypted
    python bench/ab_ingest.py --variant clear=. --variant zlib=. --compressed zlib

Each variant is `label=TREE[:SERVER]`: `hookinbox serve --no-worker` (one process, group
commit, as `bench/ingest.py` runs it) with hookinbox imported from `TREE/src`, on a fresh
database per run, loaded by wrk (64 connections) for `--seconds` after a warm-up. With
`SERVER` set, serve is asked for that server (`--server`, where the tree's serve has it).
The variants take turns within each round (A B, then B A, ...), so a machine that slows down
or speeds up during the measurement (other load, thermal limits) weighs on both alike: the
figure to read is the ratio of medians, and each round's own ratio beside it. A variant named
by `--encrypted` stores bodies and headers encrypted (`HOOKINBOX_ENCRYPTION_KEYS` set to a
fresh random key); the others run with the variable empty (encryption off). A variant named by
`--compressed` stores them compressed (`HOOKINBOX_COMPRESSION=zlib`); the others with `off`
(a tree that predates the variable ignores it). A variant may be named by both.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (
    database,
    fixed_rate,
    hookinbox_serve,
    request_file,
    save,
    server,
    wrk,
)

APP = "bench.peers.hookinbox_app:inbox"


def parse_variant(text: str) -> tuple[str, Path, str | None]:
    label, _, where = text.partition("=")
    if not label or not where:
        raise argparse.ArgumentTypeError(f"not label=TREE[:SERVER]: {text!r}")
    tree, _, server_name = where.partition(":")
    root = Path(tree).resolve()
    if not (root / "src" / "hookinbox").is_dir():
        raise argparse.ArgumentTypeError(f"no src/hookinbox under {root}")
    return label, root, server_name or None


def run_once(
    tree: Path,
    server_name: str | None,
    backend: str,
    seconds: int,
    keys: str = "",
    compression: str = "off",
) -> dict[str, Any]:
    command = hookinbox_serve(APP, "{url}", 1)
    if server_name:
        command += ["--server", server_name]
    with database(backend) as url:
        command = [part.replace("{url}", url) for part in command]
        bench_root = Path(__file__).resolve().parents[1]
        env = {"BENCH_DATABASE_URL": url, "PYTHONPATH": f"{tree / 'src'}:{bench_root}",
               "HOOKINBOX_ENCRYPTION_KEYS": keys, "HOOKINBOX_COMPRESSION": compression}  # fmt: skip
        with server(command, env=env) as running:
            target = f"{running.base_url}/webhooks/stripe"
            warmup = request_file(300)
            fixed_rate(target, warmup, rate=150, seconds=2)
            warmup.unlink()
            requests = request_file(max(20_000, 9_000 * seconds))
            pids = running.pids
            before = cpu_seconds(pids)
            load = wrk(target, requests, seconds=seconds)
            used = cpu_seconds(pids) - before
            requests.unlink()
    cpu_us = used / max(1, load.requests) * 1e6
    return {"rate": load.rate, "p50_ms": load.p50_ms, "p99_ms": load.p99_ms,
            "errors": load.errors, "cpu_us": cpu_us}  # fmt: skip


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU of the server's processes (a process gone meanwhile counts 0)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--variant", action="append", type=parse_variant, required=True)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--encrypted", action="append", default=[], metavar="LABEL",
                        help="run this variant with encryption at rest on")  # fmt: skip
    parser.add_argument("--compressed", action="append", default=[], metavar="LABEL",
                        help="run this variant with HOOKINBOX_COMPRESSION=zlib")  # fmt: skip
    args = parser.parse_args()
    key = "bench:" + base64.b64encode(os.urandom(32)).decode()
    variants: list[tuple[str, Path, str | None]] = args.variant
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for backend in args.backends.split(","):
        for round_ in range(args.rounds):
            order = variants if round_ % 2 == 0 else variants[::-1]
            for label, tree, server_name in order:
                keys = key if label in args.encrypted else ""
                compression = "zlib" if label in args.compressed else "off"
                measured = run_once(tree, server_name, backend, args.seconds, keys, compression)
                results.setdefault((backend, label), []).append(measured)
                print(f"{backend} round {round_ + 1} {label}: {measured['rate']:.0f} req/s, "
                      f"p99 {measured['p99_ms']:.1f} ms, {measured['cpu_us']:.0f} us CPU/request, "
                      f"errors {measured['errors']}",
                      file=sys.stderr, flush=True)  # fmt: skip
    base = variants[0][0]
    print(f"| backend | variant | req/s median (runs) | p99 ms median | server CPU us/request "
          f"median | req/s vs {base} |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for backend in args.backends.split(","):
        base_rate = statistics.median(r["rate"] for r in results[(backend, base)])
        for label, _, _ in variants:
            runs = results[(backend, label)]
            rate = statistics.median(r["rate"] for r in runs)
            p99 = statistics.median(r["p99_ms"] for r in runs)
            cpu = statistics.median(r["cpu_us"] for r in runs)
            each = ", ".join(f"{r['rate']:.0f}" for r in runs)
            print(f"| {backend} | {label} | {rate:.0f} ({each}) | {p99:.1f} | {cpu:.0f} | "
                  f"{rate / base_rate:.2f}x |")  # fmt: skip
    document = {
        "settings": {**vars(args), "variant": [f"{v[0]}={v[1]}:{v[2] or ''}" for v in variants]},
        "results": {f"{backend} {label}": runs for (backend, label), runs in results.items()},
    }
    print(f"\nraw results: {save('ab_ingest', document)}", file=sys.stderr)


if __name__ == "__main__":
    main()
