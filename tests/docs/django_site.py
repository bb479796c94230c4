"""A Django project made as docs/frameworks.md says: `startproject mysite .`, `startapp shop`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

Manage = Callable[..., subprocess.CompletedProcess[str]]


def start_project(directory: Path, env: Mapping[str, str]) -> Manage:
    """Make the project and its `shop` app in `directory`; `manage(*args)` runs manage.py
    there and fails the test, with its output, unless it exits 0."""

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=directory,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"manage.py {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done

    subprocess.run(
        [sys.executable, "-m", "django", "startproject", "mysite", "."], cwd=directory, check=True
    )
    manage("startapp", "shop")
    return manage
