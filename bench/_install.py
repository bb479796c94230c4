"""Installing hookinbox the way a user does, and measuring what that brought.

A wheel built from a source tree, installed into a fresh virtual environment with pip (from
the package index, through pip's cache), as `pip install hookinbox` or `hookinbox[all]` would.
Shared by `bench/footprint.py` (before/after figures) and `tests/packaging/` (the core install
stays within its budget); both count and weigh alike. Standard library only.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

TOOLS = frozenset({"pip", "setuptools", "wheel"})
"""What `python -m venv` puts in every environment: not part of anyone's footprint."""

MEASURE = r"""
import json, os, sysconfig
from importlib import metadata

site = sysconfig.get_paths()["purelib"]
found = []
for dist in metadata.distributions(path=[site]):
    size = 0
    for entry in dist.files or []:  # RECORD: the files pip wrote, compiled .pyc included
        try:
            size += os.path.getsize(dist.locate_file(entry))
        except OSError:
            pass
    found.append({"name": dist.metadata["Name"], "version": dist.version, "bytes": size,
                  "requires": dist.requires or []})
print(json.dumps(found))
"""


@dataclass(frozen=True, slots=True)
class Distribution:
    name: str
    """Normalised (PEP 503): lower case, runs of `-_.` as one `-`."""
    version: str
    bytes: int
    requires: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Footprint:
    distributions: tuple[Distribution, ...]
    """Everything installed, hookinbox included, pip and setuptools not."""

    @property
    def dependencies(self) -> list[str]:
        return sorted(d.name for d in self.distributions if d.name != "hookinbox")

    @property
    def megabytes(self) -> float:
        """Installed size of hookinbox and its dependencies, in MB (10^6 bytes)."""
        return sum(d.bytes for d in self.distributions) / 1e6


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build_wheel(tree: Path, into: Path) -> Path:
    """`pip wheel` of the project at `tree`: the file a release would upload.

    setuptools builds inside the tree (`build/`, the egg-info), so two builds of one tree at
    once (two test workers) spoil each other: one at a time per tree, under a file lock."""
    into.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(str(tree.resolve()).encode()).hexdigest()[:16]
    lock_path = Path(tempfile.gettempdir()) / f"hookinbox-wheel-{digest}.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(into),
             str(tree)],
            capture_output=True,
            text=True,
        )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"pip wheel {tree} failed:\n{result.stderr[-3000:]}")
    (wheel,) = into.glob("hookinbox-*.whl")
    return wheel


def fresh_environment(where: Path, requirement: str) -> Path:
    """A new virtual environment at `where` with `requirement` installed; its python."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True)
    python = where / "bin" / "python"
    result = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         requirement],
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_NO_INPUT": "1"},
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"pip install {requirement} failed:\n{result.stderr[-3000:]}")
    return python


def footprint(python: Path) -> Footprint:
    """What is installed in the environment of `python`, with each distribution's size."""
    output = subprocess.run(
        [str(python), "-c", MEASURE], check=True, capture_output=True, text=True
    ).stdout
    found = [
        Distribution(normalise(d["name"]), d["version"], d["bytes"], tuple(d["requires"]))
        for d in json.loads(output)
    ]
    kept = tuple(sorted((d for d in found if d.name not in TOOLS), key=lambda d: d.name))
    return Footprint(kept)
