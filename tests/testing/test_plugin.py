"""The pytest plugin as a user opts in: a conftest naming it, the inbox named in the ini."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

APP = """
from hookinbox import Inbox
from hookinbox.sources import GitHub

inbox = Inbox("sqlite:///never-used.db", sources=[GitHub(secret="gh")])
pushes = []


@inbox.handler("github", "push")
def record(event, ctx):
    pushes.append(event.payload["after"])
"""

TESTS = """
import webhooks
from hookinbox.testing import github_push


def test_a_redelivered_push_runs_once(hookinbox, deliver, run_due):
    push = github_push()
    assert [a.status for a in deliver("github", push, copies=2)] == ["accepted", "duplicate"]
    assert run_due() == 1
    assert webhooks.pushes == [push["after"]]
    assert hookinbox.database_url != webhooks.inbox.settings.database_url
"""


def pytest_in(directory: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_ini_option_names_the_inbox(tmp_path: Path) -> None:
    (tmp_path / "webhooks.py").write_text(APP)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["hookinbox.testing.pytest"]\n')
    (tmp_path / "pytest.ini").write_text("[pytest]\nhookinbox_app = webhooks:inbox\n")
    (tmp_path / "test_webhooks.py").write_text(TESTS)
    done = pytest_in(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert not (tmp_path / "never-used.db").exists()  # the app's own database is left alone


def test_an_unnamed_inbox_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "webhooks.py").write_text(APP)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["hookinbox.testing.pytest"]\n')
    (tmp_path / "test_webhooks.py").write_text(TESTS)
    done = pytest_in(tmp_path)
    assert done.returncode != 0
    assert "name your inbox: hookinbox_app = module:attribute" in done.stdout + done.stderr
