"""`make demo` on a fresh clone installs only what the demo runs (README.md, "Quickstart").

The Makefile's own install step, into a venv of its own: the server and the simulator at the
test lock's versions, well under the 300 MB a newcomer's first `make demo` may cost, and none
of the test tool chain (README's figures were measured on a fresh clone: 94 MB, about 40 s
in all). pip installs from the package index through its cache; about half a minute.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench._install import footprint

ROOT = Path(__file__).resolve().parents[2]
MAX_MEGABYTES = 150.0
TEST_TOOLS = {"pytest", "mypy", "ruff", "playwright", "hypothesis", "stripe", "django", "flask"}


def test_make_demo_installs_the_server_and_the_simulator_only(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    result = subprocess.run(
        ["make", f"VENV={venv}", f"{venv}/bin/.demo-installed"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr

    installed = footprint(venv / "bin" / "python")

    names = set(installed.dependencies)
    assert {"uvicorn", "httpx", "rich", "prometheus-client", "sqlalchemy"} <= names
    assert not names & TEST_TOOLS, names & TEST_TOOLS
    assert installed.megabytes < MAX_MEGABYTES, installed.megabytes
    check = subprocess.run(
        [str(venv / "bin" / "hookinbox"), "demo", "--help"], capture_output=True, text=True
    )
    assert check.returncode == 0 and "exactly-once" in check.stdout, check.stderr
