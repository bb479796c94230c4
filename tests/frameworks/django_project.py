"""Driving a real Django project from tests: manage.py commands, runserver, worker processes.

Django is configured once per process, so each project runs in subprocesses of its own, on
the database the test hands it; the test reads the outcome with its own connection.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tests.support.server import ROOT, free_port, serving
from tests.support.workers import WorkerProcess

PROBE = "tests.django_project.settings"
SHOP = "hookinbox.examples.django_shop.settings"


@dataclass(frozen=True)
class DjangoProject:
    settings: str
    env: dict[str, str]

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "django", *args, "--settings", self.settings]

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.argv(*args),
            cwd=ROOT,
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"manage.py {' '.join(args)} exited {done.returncode}:\n"
                f"{done.stdout}\n{done.stderr}"
            )
        return done

    @contextmanager
    def server(self) -> Iterator[str]:
        """runserver on loopback; ready once the webhook URL answers GET with 405."""
        port = free_port()
        command = self.argv("runserver", f"127.0.0.1:{port}", "--noreload")
        with serving(
            command, port, env=self.env, ready_path="/webhooks/stripe", ready_status=405
        ) as url:
            yield url

    def worker(self, *args: str) -> WorkerProcess:
        """`manage.py hookinbox_worker` as a long-running process."""
        return WorkerProcess("", env=self.env, argv=self.argv("hookinbox_worker", *args))
