"""`verify` against a business table written by hand: each kind of failure, counted exactly."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hookinbox import ConfigurationError
from hookinbox.simulate import SimulationConfig, simulate, verify
from tests.simulate.conftest import Receivers


def test_lost_doubled_stale_and_forged_effects_are_each_counted(
    receivers: Receivers, tmp_path: Path
) -> None:
    config = SimulationConfig(
        provider="stripe",
        secret="whsec_x",
        target=f"{receivers.base_url}/flaky/0",  # answers 200 to everything, forged or not
        events=120,
        seed=51,
        forged_rate=0.05,
    )
    report = simulate(config, progress=False)
    expected = report.expected_effects
    plain = sorted(k for k, state in expected.items() if state is None)
    stateful = sorted(k for k, state in expected.items() if state is not None)
    lost, doubled, stale = plain[0], plain[1], stateful[0]
    forged = next(e for e in report.invalid_events.values() if e is not None)
    rows = [(key, expected[key]) for key in sorted(expected) if key != lost]
    rows = [(k, "stale" if k == stale else s) for k, s in rows]
    rows += [(doubled, None), (forged, None), ("pi_not_ours", None), ("pi_not_ours", None)]
    database = tmp_path / "shop.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE effects (payment_id TEXT, status TEXT)")
        connection.executemany("INSERT INTO effects VALUES (?, ?)", rows)

    result = verify(
        report, f"sqlite:///{database}", effects_sql="SELECT payment_id, status FROM effects"
    )

    assert result.checked == ("effects",)
    assert (result.lost, result.doubled, result.states_wrong) == (1, 1, 1)
    assert result.effects_found == result.effects_expected - 1 == len(expected) - 1
    assert result.states_checked == len(stateful)
    assert result.invalid_accepted == report.invalid_accepted == 6  # all answered 200
    assert len(result.problems) == 4 and not result.ok


def test_a_failing_effects_query_is_a_usage_error(receivers: Receivers, tmp_path: Path) -> None:
    config = SimulationConfig(
        provider="stripe", secret="x", target=f"{receivers.base_url}/flaky/0", events=3
    )
    report = simulate(config, progress=False)
    database = tmp_path / "empty.db"
    sqlite3.connect(database).close()
    with pytest.raises(ConfigurationError, match="the effects query failed: no such table"):
        verify(report, f"sqlite:///{database}", effects_sql="SELECT id FROM missing")
    with pytest.raises(ConfigurationError, match="no SQLite database"):
        verify(report, f"sqlite:///{tmp_path / 'absent.db'}")
