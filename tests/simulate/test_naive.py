"""The simulator catches a receiver that is not exactly-once: check-then-insert, no signatures."""

from __future__ import annotations

import sqlite3

import pytest

from hookinbox.simulate import SimulationConfig, simulate, verify
from tests.simulate.conftest import Receivers
from tests.support.server import run_cli

EFFECTS_SQL = "SELECT payment_id FROM orders"


def test_concurrent_duplicates_double_a_check_then_insert_receiver(receivers: Receivers) -> None:
    config = SimulationConfig(
        provider="stripe",
        secret="whsec_anything",  # the naive receiver checks no signature...
        target=f"{receivers.base_url}/naive",
        events=150,
        seed=31,
        burst_rate=0.2,
        burst_size=4,
        forged_rate=0.02,
    )
    report = simulate(config, progress=False)
    result = verify(report, receivers.naive_db_url, effects_sql=EFFECTS_SQL)

    assert report.complete
    assert report.invalid["forged"] == {"200": 3}  # ...so forged deliveries are answered 2xx
    assert result.checked == ("effects",) and result.processed is None
    assert result.doubled > 0
    assert result.lost == 0
    assert result.invalid_accepted == 3
    assert not result.ok
    # The doubled figure is the table's: extra rows of this run's payment intents.
    with sqlite3.connect(receivers.naive_db) as connection:
        counts = connection.execute(
            "SELECT payment_id, COUNT(*) FROM orders GROUP BY payment_id HAVING COUNT(*) > 1"
        ).fetchall()
    extra = sum(n - 1 for payment, n in counts if payment in report.planned_effects)
    assert result.doubled == extra


@pytest.mark.slow
def test_the_cli_exits_1_when_the_check_fails(receivers: Receivers) -> None:
    result = run_cli(
        "simulate",
        "--provider", "stripe",
        "--secret", "whsec_anything",
        "--target", f"{receivers.base_url}/naive",
        "--events", "100",
        "--seed", "32",
        "--burst-rate", "0.3",
        "--forged-rate", "0",
        "--verify", receivers.naive_db_url,
        "--effects-sql", EFFECTS_SQL,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "check failed:" in result.stderr and "doubled" in result.stderr
    assert "Exactly-once check" in result.stdout and "FAILED" in result.stdout
