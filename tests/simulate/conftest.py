"""A test receiver on loopback, shared by this package's tests."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.server import ROOT, free_port


@dataclass(frozen=True)
class Receivers:
    base_url: str
    naive_db: Path

    @property
    def naive_db_url(self) -> str:
        return f"sqlite:///{self.naive_db}"


@pytest.fixture(scope="session")
def receivers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Receivers]:
    """tests/simulate/receivers.py served by uvicorn in a subprocess."""
    database = tmp_path_factory.mktemp("naive") / "naive.db"
    port = free_port()
    log = tempfile.TemporaryFile("w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "tests.simulate.receivers:app",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env={**os.environ, "NAIVE_RECEIVER_DB": str(database)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError(f"test receiver did not start:\n{log.read()}")
            time.sleep(0.05)
        yield Receivers(base_url, database)
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
