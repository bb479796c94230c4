"""Benchmark 1, ingest: hookinbox against the bare limit and the peers users would write instead.

    python bench/ingest.py                     # everything: ~25 min
    python bench/ingest.py --backends sqlite --workers 1 --runs 1 --seconds 5   # a quick look
    python bench/ingest.py --smoke             # seconds; what CI runs to keep this working
    python bench/ingest.py --backends sqlite,postgres,mysql   # MariaDB too (not by default)

For each backend (SQLite, PostgreSQL; MariaDB with `--backends mysql`), server process count
(1, 2) and peer:
- saturation: wrk, 64 connections, `--seconds` per run, `--runs` runs: requests/s, p50/p99/max;
- a fixed moderate rate (`--rate` events/s, open loop, separate process): p50/p99/max;
- the doubled business effects when every event is delivered 3 times at once to 2 server
  processes (hookinbox: after its worker drained; the bare limit stores only: no effects).
Peers: `hookinbox serve --no-worker`; the bare limit (`peers/bare.py`); a tutorial-style
FastAPI + SQLAlchemy ORM endpoint (`peers/naive.py`); AWS Lambda Powertools' idempotency with
Redis (`peers/powertools.py`). Same machine, same payloads, same load generators, one run.

Every run also measures the ceiling (`peers/ceiling.py`: the same raw ASGI callable as the bare
limit, with no database), first in each backend and process count whatever `--peers` says, and
reports each peer's requests/s against it ("vs ceiling") as well as against the bare limit.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa

from bench._common import (
    Load,
    database,
    fixed_rate,
    hookinbox_serve,
    request_file,
    sa_url,
    save,
    server,
    summary,
    uvicorn_app,
    wrk,
)

PEERS = {
    "hookinbox": None,
    "hookinbox-nogc": None,  # group commit off: one transaction per delivery
    "hookinbox-2w": None,  # group commit with two writer threads (the default is one)
    "ceiling": "bench.peers.ceiling:app",  # no database: measured in every run, see main()
    "bare": "bench.peers.bare:app",
    "naive": "bench.peers.naive:app",
    "powertools": "bench.peers.powertools:app",
}
PEER_ENV = {"hookinbox-2w": {"BENCH_GROUP_COMMIT_WRITERS": "2"}}
HOOKINBOX_APP = "bench.peers.hookinbox_app:inbox"


def command(peer: str, url: str, workers: int, *, worker: bool = False) -> list[str]:
    if peer.startswith("hookinbox"):
        command = hookinbox_serve(HOOKINBOX_APP, url, workers, worker=worker)
        return [*command, "--no-group-commit"] if peer == "hookinbox-nogc" else command
    return uvicorn_app(str(PEERS[peer]), workers)


def measure(peer: str, backend: str, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    saturation: list[Load] = []
    moderate: list[Load] = []
    with database(backend) as url, server(command(peer, url, workers),
                                          env={"BENCH_DATABASE_URL": url,
                                               **PEER_ENV.get(peer, {})}) as running:  # fmt: skip
        target = f"{running.base_url}/webhooks/stripe"
        warmup = request_file(200)
        fixed_rate(target, warmup, rate=100, seconds=1)
        warmup.unlink()
        for _ in range(args.runs):
            if args.smoke:
                requests = request_file(400)
                saturation.append(fixed_rate(target, requests, rate=200, seconds=2))
            else:
                requests = request_file(max(20_000, 8_000 * args.seconds))
                saturation.append(wrk(target, requests, seconds=args.seconds))
            requests.unlink()
            requests = request_file(int(args.rate * args.seconds) + 10)
            moderate.append(fixed_rate(target, requests, rate=args.rate, seconds=args.seconds))
            requests.unlink()
    return {
        "peer": peer,
        "backend": backend,
        "workers": workers,
        "saturation": saturation,
        "moderate": moderate,
        "rate": summary([r.rate for r in saturation]),
        "p99_ms": summary([r.p99_ms for r in saturation]),
        "moderate_p99_ms": summary([r.p99_ms for r in moderate]),
        "errors": sum(r.errors for r in saturation + moderate),
    }


def doubled_effects(peer: str, backend: str, events: int) -> dict[str, Any]:
    """Every event delivered 3 times at once to 2 server processes (as in production, several
    instances): business effects beyond one per payment."""
    with database(backend) as url:
        with server(command(peer, url, 2, worker=True), env={"BENCH_DATABASE_URL": url}) as running:
            target = f"{running.base_url}/webhooks/stripe"
            requests = request_file(events, copies=3)
            load = fixed_rate(target, requests, rate=50, seconds=events / 50, copies=3)
            requests.unlink()
            if peer.startswith("hookinbox"):
                _wait_processed(url, events)
        engine = sa.create_engine(sa_url(url))
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text("SELECT payment_id, COUNT(*) FROM bench_orders GROUP BY payment_id")
            ).all()
        engine.dispose()
    doubled = sum(count - 1 for _, count in rows)
    return {"peer": peer, "backend": backend, "events": events, "effects": len(rows),
            "doubled": doubled, "answers_not_2xx": load.errors}  # fmt: skip


def _wait_processed(url: str, events: int, timeout: float = 120) -> None:
    engine = sa.create_engine(sa_url(url))
    deadline = time.monotonic() + timeout
    query = sa.text("SELECT COUNT(*) FROM hookinbox_events WHERE status = 'processed'")
    try:
        while time.monotonic() < deadline:
            with engine.connect() as connection:
                if connection.execute(query).scalar_one() >= events:
                    return
            time.sleep(0.2)
    finally:
        engine.dispose()
    raise RuntimeError("hookinbox's worker did not drain in time")


def medians_of(rows: list[dict[str, Any]], peer: str) -> dict[tuple[str, int], float]:
    """`peer`'s median requests/s for each (backend, server processes) it was measured in."""
    return {(r["backend"], r["workers"]): r["rate"]["median"] for r in rows if r["peer"] == peer}


def ratio(rate: float, base: float | None) -> str:
    return f"{rate / base:.2f}x" if base else "-"


def render(rows: list[dict[str, Any]], doubles: list[dict[str, Any]]) -> str:
    lines = ["| backend | processes | peer | req/s (median, min-max) | p99 ms at saturation | "
             f"p99 ms at {rows[0]['moderate'][0].rate:.0f}/s | vs bare | vs ceiling |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    bare, ceiling = medians_of(rows, "bare"), medians_of(rows, "ceiling")
    for r in rows:
        where = (r["backend"], r["workers"])
        rate, p99, moderate = r["rate"], r["p99_ms"], r["moderate_p99_ms"]
        lines.append(
            f"| {r['backend']} | {r['workers']} | {r['peer']} | {rate['median']:.0f} "
            f"({rate['min']:.0f}-{rate['max']:.0f}) | {p99['median']:.1f} | "
            f"{moderate['median']:.1f} | {ratio(rate['median'], bare.get(where))} | "
            f"{ratio(rate['median'], ceiling.get(where))} |"
        )
    if doubles:
        lines += [
            "",
            "| backend | peer | events x3 at once | effects | doubled |",
            "|---|---|---|---|---|",
        ]
        for d in doubles:
            lines.append(f"| {d['backend']} | {d['peer']} | {d['events']} | {d['effects']} | "
                         f"{d['doubled']} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument(
        "--peers",
        default="hookinbox,hookinbox-nogc,bare,naive,powertools",
        help=f"any of {','.join(PEERS)}; the ceiling is measured whatever this says",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--doubled-events", type=int, default=300)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, no wrk")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.seconds, args.rate, args.doubled_events = 1, 1, 50, 20
    # The ceiling is the reference of every run: measured first, whatever --peers names.
    peers = ["ceiling", *(p for p in args.peers.split(",") if p != "ceiling")]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        parser.error(f"unknown peer(s) {','.join(unknown)}: any of {','.join(PEERS)}")
    rows: list[dict[str, Any]] = []
    doubles: list[dict[str, Any]] = []
    for backend in args.backends.split(","):
        for workers in (int(w) for w in args.workers.split(",")):
            for peer in peers:
                print(f"{backend} x{workers} {peer} ...", file=sys.stderr, flush=True)
                rows.append(measure(peer, backend, workers, args))
        for peer in peers:
            if peer in ("hookinbox", "naive", "powertools"):  # bare and ceiling have no effects
                print(f"{backend} {peer}: 3 copies at once ...", file=sys.stderr, flush=True)
                doubles.append(doubled_effects(peer, backend, args.doubled_events))
    table = render(rows, doubles)
    path = save("ingest", {"settings": vars(args), "results": rows, "doubled": doubles})
    print(table)
    print(f"\nraw results: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
