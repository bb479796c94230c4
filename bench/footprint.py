"""Footprint: what `pip install hookinbox` brings, and how fast it starts.

    python bench/footprint.py                            # this tree: the core and [all]
    python bench/footprint.py --baseline-ref 56ea4d2     # ... and a git ref, in the same run
    python bench/footprint.py --runs 21 --extra server --extra all

For each tree (this checkout, and `--baseline-ref` checked out with `git worktree add` into a
temporary directory) the script builds the wheel (`pip wheel`), and for the core and each of
`--extra` makes a fresh virtual environment and `pip install`s the wheel into it, from the
package index through pip's cache, as a user would. It then reports:

- dependencies: distributions installed besides hookinbox (pip and setuptools, which every
  venv has, not counted);
- installed MB: the files pip wrote for hookinbox and those dependencies (each distribution's
  RECORD, compiled .pyc included), in 10^6 bytes;
- the median wall time (and min-max) over `--runs` runs, interleaved across environments so
  that the machine's load falls on all alike, of `python -c "import hookinbox"`,
  `python -c "from hookinbox import Inbox"` (what an application pays on first use; the same
  as the first for a tree whose `import hookinbox` imports everything), and `hookinbox --help`;
- the modules loaded by `import hookinbox` and by `hookinbox --help`.

A tree without an extra named in `--extra` (an older one) installs its plain wheel for it, as
pip does, with a warning. Raw JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import ROOT, save, summary
from bench._install import build_wheel, footprint, fresh_environment

HELP_MODULES = (
    "import sys\n"
    "from hookinbox.cli import main\n"
    "try:\n"
    "    main(['--help'], prog_name='hookinbox')\n"
    "except SystemExit:\n"
    "    pass\n"
    "print(len(sys.modules), file=sys.stderr)\n"
)


@dataclass
class Environment:
    tree: str
    install: str
    python: Path
    dependencies: list[str]
    megabytes: float
    timings: dict[str, list[float]] = field(default_factory=dict)
    modules: dict[str, int] = field(default_factory=dict)

    def commands(self) -> dict[str, list[str]]:
        hookinbox = str(self.python.parent / "hookinbox")
        return {
            "import hookinbox": [str(self.python), "-c", "import hookinbox"],
            "from hookinbox import Inbox": [str(self.python), "-c", "from hookinbox import Inbox"],
            "hookinbox --help": [hookinbox, "--help"],
        }


def timed(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started


def count_modules(python: Path, code: str, cwd: Path) -> int:
    result = subprocess.run(
        [str(python), "-c", code], cwd=cwd, check=True, capture_output=True, text=True
    )
    return int(result.stderr.strip().splitlines()[-1])


def checkout(ref: str, where: Path) -> Path:
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(where), ref],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return where


def prepare(tree: str, source: Path, extras: list[str], work: Path) -> list[Environment]:
    wheel = build_wheel(source, work / "wheel")
    made = []
    for extra in ["", *extras]:
        install = f"hookinbox[{extra}]" if extra else "hookinbox"
        print(f"{tree}: pip install {install} ...", file=sys.stderr, flush=True)
        requirement = f"{wheel}[{extra}]" if extra else str(wheel)
        python = fresh_environment(work / (extra or "core").replace(",", "-"), requirement)
        found = footprint(python)
        made.append(Environment(tree, install, python, found.dependencies, found.megabytes))
    return made


def measure(environments: list[Environment], runs: int, cwd: Path) -> None:
    for environment in environments:
        for name, command in environment.commands().items():
            timed(command, cwd)  # warm the file cache and write the .pyc files first
            environment.timings[name] = []
    for _ in range(runs):
        for environment in environments:  # interleaved: load spikes hit every tree alike
            for name, command in environment.commands().items():
                environment.timings[name].append(timed(command, cwd))
    for environment in environments:
        environment.modules = {
            "import hookinbox": count_modules(
                environment.python,
                "import sys, hookinbox; print(len(sys.modules), file=sys.stderr)",
                cwd,
            ),
            "hookinbox --help": count_modules(environment.python, HELP_MODULES, cwd),
        }


def table(environments: list[Environment]) -> str:
    lines = [
        "| tree | install | dependencies | installed MB | `import hookinbox` s | "
        "`from hookinbox import Inbox` s | `hookinbox --help` s | modules (import / help) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in environments:
        times = [
            f"{statistics.median(e.timings[name]):.3f}"
            for name in ("import hookinbox", "from hookinbox import Inbox", "hookinbox --help")
        ]
        lines.append(
            f"| {e.tree} | `{e.install}` | {len(e.dependencies)} | {e.megabytes:.1f} | "
            + " | ".join(times)
            + f" | {e.modules['import hookinbox']} / {e.modules['hookinbox --help']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-ref", help="a git ref to measure in the same run (56ea4d2)")
    parser.add_argument("--runs", type=int, default=11, help="timed runs of each command")
    parser.add_argument(
        "--extra",
        action="append",
        help="an install besides the core, e.g. all or server,postgres (repeatable; default all)",
    )
    arguments = parser.parse_args()
    extras = arguments.extra or ["all"]
    with tempfile.TemporaryDirectory(prefix="hookinbox-footprint-") as scratch:
        work = Path(scratch)
        trees = [("this tree", ROOT)]
        if arguments.baseline_ref:
            trees.insert(
                0, (arguments.baseline_ref, checkout(arguments.baseline_ref, work / "ref"))
            )
        try:
            environments = [
                environment
                for index, (name, source) in enumerate(trees)
                for environment in prepare(name, source, extras, work / f"env{index}")
            ]
            cwd = work / "cwd"  # no hookinbox source tree on the path: the installed one loads
            cwd.mkdir()
            measure(environments, arguments.runs, cwd)
        finally:
            if arguments.baseline_ref:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(work / "ref")],
                    cwd=ROOT,
                    capture_output=True,
                )
        print(table(environments))
        document: dict[str, Any] = {
            "runs": arguments.runs,
            "environments": [
                {
                    "tree": e.tree,
                    "install": e.install,
                    "dependencies": e.dependencies,
                    "megabytes": round(e.megabytes, 2),
                    "timings": {name: summary(values) for name, values in e.timings.items()},
                    "modules": e.modules,
                }
                for e in environments
            ],
        }
        path = save("footprint", document)
        print(f"raw results: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
