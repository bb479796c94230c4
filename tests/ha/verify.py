"""Exactly-once, judged in the test bed's client host: `python -m tests.ha.verify URL ACKED`.

Waits (up to --drain-timeout) until every acknowledged event has been processed, then prints
one JSON object: lost (acknowledged, yet no effect and no processed event), doubled (an effect
applied more than once), the events' statuses, and which host applied how many. Connects with
the same multi-host URL as the application hosts, so it finds the primary as they do.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import psycopg


def snapshot(url: str, run: str) -> tuple[Counter[str], dict[str, str], Counter[str]]:
    pattern = f"evt_{run}_%"
    with psycopg.connect(url, connect_timeout=5) as connection:
        effects = Counter(
            row[0]
            for row in connection.execute(
                "SELECT event_id FROM ha_effects WHERE event_id LIKE %s", (pattern,)
            )
        )
        statuses = dict(
            connection.execute(
                "SELECT event_id, status FROM hookinbox_events WHERE event_id LIKE %s", (pattern,)
            ).fetchall()
        )
        hosts = Counter(
            dict(
                connection.execute(
                    "SELECT host, count(*) FROM ha_effects WHERE event_id LIKE %s GROUP BY host",
                    (pattern,),
                ).fetchall()
            )
        )
    return effects, statuses, hosts


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("acked")
    parser.add_argument("--run", required=True)
    parser.add_argument("--drain-timeout", type=float, default=90.0)
    args = parser.parse_args()
    acked = set(Path(args.acked).read_text().split())
    deadline = time.monotonic() + args.drain_timeout
    while True:
        try:
            effects, statuses, hosts = snapshot(args.url, args.run)
        except psycopg.OperationalError:
            effects, statuses, hosts = Counter(), {}, Counter()
        drained = bool(statuses) and all(
            status not in ("pending", "processing", "deferred") for status in statuses.values()
        )
        if (drained and acked <= set(effects)) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    print(
        json.dumps(
            {
                "acked": len(acked),
                "stored": len(statuses),
                "lost": sorted(acked - set(effects)),
                "doubled": sorted(key for key, count in effects.items() if count > 1),
                "statuses": dict(Counter(statuses.values())),
                "hosts": dict(hosts),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
