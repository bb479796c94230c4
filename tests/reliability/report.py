"""Print the reliability table from a report file: `python -m tests.reliability.report FILE`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

COLUMNS = ("fault", "backend", "deliveries", "kills", "restarts", "lost", "doubled", "detail")


def table(lines: list[str]) -> str:
    rows = [json.loads(line) for line in lines if line.strip()]
    rows.sort(key=lambda row: (row["fault"], row["backend"]))
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = [str(row[column]).replace("|", "\\|") for column in COLUMNS]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.reliability.report REPORT.jsonl", file=sys.stderr)
        return 2
    path = Path(argv[0])
    if not path.is_file():
        print(f"error: no report at {path}", file=sys.stderr)
        return 1
    print(table(path.read_text(encoding="utf-8").splitlines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
