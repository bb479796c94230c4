"""Benchmark: the upgrade to schema 14 of a filled inbox (the payloads' copy, then the step).

    python bench/upgrade_14.py                    # 300,000 events, PostgreSQL
    python bench/upgrade_14.py --events 1m --backend sqlite

One fresh database at schema 13 gets `--events` events (`bench/growth.py`'s rows: 100 days of
Stripe-shaped events with their bodies), then this tree's migration runs in two timed parts:
the copy before the step (`_payload_copy.copy_payloads`: short transactions, paced, while
older processes would go on) and the step itself (`migrate`: what holds deliveries). Reported:
both durations, the copy's rate, and the bytes of the events and payloads tables after it.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import database, save
from bench.growth import HISTORY, add_rows, log, open_engine, parse_size
from hookinbox._storage import _migrations
from hookinbox._storage._payload_copy import copy_payloads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", default="300k")
    parser.add_argument("--backend", default="postgres", choices=("postgres", "sqlite", "mysql"))
    args = parser.parse_args()
    count = parse_size(args.events)
    with database(args.backend) as url:
        engine = open_engine(url)
        _migrations.migrate(engine, target=13)
        now = datetime.now(UTC)
        add_rows(engine, count, kind="background", oldest=now - HISTORY, newest=now)
        started = time.monotonic()
        copy_payloads(engine, _migrations.LATEST_VERSION)
        copied = time.monotonic() - started
        started = time.monotonic()
        _migrations.migrate(engine)
        step = time.monotonic() - started
        engine.dispose()
    result = {
        "backend": args.backend,
        "events": count,
        "copy_seconds": round(copied, 1),
        "copy_rate": round(count / copied),
        "step_seconds": round(step, 3),
    }
    log(str(result))
    save("upgrade_14", result)
    print(result)


if __name__ == "__main__":
    main()
