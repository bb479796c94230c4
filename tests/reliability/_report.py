"""What each reliability test tried and what came of it, for the table in docs/reliability.md.

A test states its counts with `record(Trial(...))` after asserting them. With
HOOKINBOX_RELIABILITY_REPORT set to a file, every trial is appended to it as one JSON line
(xdist workers append to the same file: one short `write` per line); `python -m
tests.reliability.report FILE` prints the table. Without the variable, nothing is written.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

REPORT_ENV = "HOOKINBOX_RELIABILITY_REPORT"


@dataclass(frozen=True, slots=True)
class Trial:
    """One fault or input class, tried once, with its counts."""

    fault: str
    """What was done to the system, in a few words ("PostgreSQL stopped and started")."""
    backend: str
    """"sqlite", "postgres" or "-" when no database is involved."""
    deliveries: int
    """Requests sent (for hostile input: inputs tried)."""
    kills: int = 0
    restarts: int = 0
    lost: int = 0
    """Deliveries answered 2xx that were never processed (or never stored)."""
    doubled: int = 0
    """Deliveries whose effect was applied more than once (or stored unverified)."""
    detail: str = ""
    """What else the test saw: statuses, timings, log lines."""


def record(trial: Trial) -> None:
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    line = json.dumps(asdict(trial), separators=(",", ":")) + "\n"
    with open(path, "a", encoding="utf-8") as file:
        file.write(line)
