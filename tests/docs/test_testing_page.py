"""docs/testing.md followed literally: the pytest section's files run under pytest, on SQLite
and with `--hookinbox-db` on PostgreSQL; the Django section's `shop/tests.py`, in the project
docs/frameworks.md builds, runs under Django's test runner on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import POSTGRES_URL, REQUIRE_POSTGRES
from tests.docs.blocks import ROOT, FileBlock, parse, run, section
from tests.docs.django_site import start_project

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

PAGE = ROOT / "docs" / "testing.md"
FRAMEWORKS = ROOT / "docs" / "frameworks.md"


def postgres_url() -> str:
    if not POSTGRES_URL:
        if REQUIRE_POSTGRES:
            pytest.fail("HOOKINBOX_TEST_POSTGRES_URL is not set")
        pytest.skip("HOOKINBOX_TEST_POSTGRES_URL is not set")
    return POSTGRES_URL


def write_section(page: Path, heading: str, directory: Path) -> list[str]:
    """Write the section's file blocks under `directory`; their paths."""
    document = parse(page)
    examples = section(document, heading)
    files = [example.parsed for example in examples if isinstance(example.parsed, FileBlock)]
    cwd = Path.cwd()
    os.chdir(directory)
    try:
        run(document, [e for e in examples if isinstance(e.parsed, FileBlock)])
    finally:
        os.chdir(cwd)
    return [block.path for block in files]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO"))}
    env.pop("HOOKINBOX_DATABASE_URL", None)
    return env


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_pytest_section_passes_under_pytest(tmp_path: Path, backend: str) -> None:
    paths = write_section(PAGE, "With pytest", tmp_path)
    assert sorted(paths) == ["conftest.py", "myapp.py", "test_myapp.py"]
    options = ["--hookinbox-db", postgres_url()] if backend == "postgres" else []
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options],
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_django_section_passes_under_djangos_test_runner(tmp_path: Path, backend: str) -> None:
    env = {**environment(), "STRIPE_WEBHOOK_SECRET": "whsec_testing_docs"}

    manage = start_project(tmp_path, env)
    write_section(FRAMEWORKS, "Django", tmp_path)
    assert write_section(PAGE, "Django", tmp_path) == ["shop/tests.py"]
    if backend == "postgres":
        # The project's own database, on the test server; Django makes test_<name> beside it.
        env["TEST_DATABASE_URL"] = postgres_url()
        name = f"hookinbox_docs_{uuid.uuid4().hex[:8]}"
        with (tmp_path / "mysite" / "settings.py").open("a") as settings:
            settings.write(
                "\nfrom hookinbox.examples.django_shop.settings import database\n"
                f"DATABASES['default'] = database(os.environ['TEST_DATABASE_URL'])\n"
                f"DATABASES['default']['NAME'] = {name!r}\n"
            )
    manage("makemigrations", "shop")
    done = manage("test", "shop", "--noinput", "-v", "2")
    assert "Ran 2 tests" in done.stderr, done.stderr
    assert "OK" in done.stderr
