"""Print the multi-host test bed's table from its report: `python -m tests.ha.report FILE`."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def table(lines: list[str]) -> str:
    rows = [json.loads(line) for line in lines if line.strip()]
    if not rows:
        return "(no trials recorded)"
    columns = list(rows[0])
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [str(row.get(column, "")).replace("|", "\\|") for column in columns]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.ha.report REPORT.jsonl", file=sys.stderr)
        return 2
    path = Path(argv[0])
    if not path.is_file():
        print(f"error: no report at {path}", file=sys.stderr)
        return 1
    print(table(path.read_text(encoding="utf-8").splitlines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
