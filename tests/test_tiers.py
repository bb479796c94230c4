"""The tiers' path lists name what is there: a renamed or moved test module must not leave
the `long` tier (and `make test`'s ten minutes) or MariaDB's cases silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LONG_TESTS, MYSQL_LONG_TESTS, MYSQL_TESTS, SLOW_DIRECTORIES

TESTS = Path(__file__).parent


@pytest.mark.parametrize("path", [*LONG_TESTS, *MYSQL_TESTS, *MYSQL_LONG_TESTS])
def test_every_tier_path_names_a_test_module_or_directory(path: str) -> None:
    path, _, test = path.partition("::")
    test = test.partition("[")[0]  # a prefix of the parameters' id names the test before it
    found = TESTS / path
    if test:
        assert found.is_file() and f"def {test}(" in found.read_text(), f"no {test} in {path}"
    elif path.endswith("/"):
        assert found.is_dir() and any(found.glob("test_*.py")), f"{path} holds no test module"
    else:
        assert found.is_file() and found.name.startswith("test_"), f"{path} is no test module"


def test_slow_directories_exist() -> None:
    assert all((TESTS / name).is_dir() for name in SLOW_DIRECTORIES)


def test_the_mysql_long_tier_lies_within_mysql_s_paths() -> None:
    assert all(path.startswith(MYSQL_TESTS) for path in MYSQL_LONG_TESTS)
