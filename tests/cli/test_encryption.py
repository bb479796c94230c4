"""`hookinbox encryption rotate` killed halfway (SIGKILL, a real process) and run again; keys
that cannot read what is stored stop `serve` and `worker` at start in one line, exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter

import pytest

from hookinbox._storage import Store
from hookinbox._storage._payload_codec import KEYS_ENV, key_id_of, payload_key_id
from hookinbox._storage._payload_packing import COMPRESSION_ENV
from tests.storage.test_encryption import K1, K1_OTHER, K2, delivery, raw
from tests.support.server import ROOT, hookinbox_command, run_cli

APP = "tests.apps.orders:inbox"
EVENTS = 400


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "mysql"])
def test_a_rotation_killed_halfway_leaves_every_event_readable_and_a_rerun_finishes(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEYS_ENV, K1)
    store = Store(db_url)
    items = [delivery(f"evt_{n:03}", n) for n in range(EVENTS)]
    with store.transaction() as connection:
        store.ingest.record_batch(connection, items)
    monkeypatch.setenv(KEYS_ENV, f"{K2},{K1}")
    command = hookinbox_command(
        "encryption", "rotate", "--database-url", db_url, "--batch-size", "10", "--pause", "0.05"
    )

    def keys() -> Counter[str | None]:
        return Counter(key_id_of(body) for body, _ in raw(store).values())

    env = dict(os.environ)
    with subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE) as rotation:
        deadline = time.monotonic() + 60
        while keys()["k2"] < 60:
            assert rotation.poll() is None, rotation.stderr and rotation.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        rotation.send_signal(signal.SIGKILL)
        rotation.wait()
    assert rotation.returncode == -signal.SIGKILL
    halfway = keys()
    assert halfway["k2"] >= 60 and halfway["k1"] > 0 and halfway.total() == EVENTS
    for item in items:  # every event whole, under either key
        event = store.get_event("stripe", item.event_id)
        assert event is not None and (event.body, event.headers) == (item.body, item.headers)

    dry = run_cli("encryption", "rotate", "--database-url", db_url, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["by_key"] == {"k1": halfway["k1"], "k2": halfway["k2"]}
    rerun = run_cli("encryption", "rotate", "--database-url", db_url)
    assert rerun.returncode == 0, rerun.stderr
    assert f"rewrote {halfway['k1']} under key 'k2'" in rerun.stdout
    assert keys() == {"k2": EVENTS}
    assert {payload_key_id(body, headers) for body, headers in raw(store).values()} == {"k2"}
    monkeypatch.setenv(KEYS_ENV, K2)  # k1 retired
    assert [e.body for e in store.operator.all_events()] == [i.body for i in items]
    store.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "mysql"])
@pytest.mark.parametrize("command", ["serve", "worker"])
def test_keys_that_cannot_read_what_is_stored_stop_the_start_in_one_line(
    db_url: str, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setenv(KEYS_ENV, K1)
    store = Store(db_url)
    store.ingest.record(delivery("evt_1"))
    store.dispose()
    wrong = run_cli(command, APP, "--database-url", db_url, env={KEYS_ENV: K1_OTHER})
    malformed = run_cli(command, APP, "--database-url", db_url, env={KEYS_ENV: "k1:abc"})
    monkeypatch.delenv(KEYS_ENV)
    missing = run_cli(command, APP, "--database-url", db_url)
    for result, says in [
        (wrong, "error: event stripe/evt_1: its stored payload does not decrypt with key 'k1'"),
        (malformed, "error: HOOKINBOX_ENCRYPTION_KEYS: entry 1 ('k1'): the key is not base64"),
        (
            missing,
            "error: events are stored encrypted (event stripe/evt_1, key 'k1') and "
            "HOOKINBOX_ENCRYPTION_KEYS is not set",
        ),
    ]:
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [result.stderr.strip()]
        assert result.stderr.startswith(says)
        assert K1_OTHER.partition(":")[2] not in result.stderr


def test_check_and_new_key(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    made = run_cli("encryption", "new-key", "--id", "2026-12")
    assert made.returncode == 0 and made.stdout.startswith("2026-12:")
    monkeypatch.setenv(KEYS_ENV, made.stdout.strip())
    Store(db_url).ingest.record(delivery("evt_1"))
    checked = run_cli("encryption", "check", "--database-url", db_url)
    assert (checked.returncode, checked.stdout) == (0, "ok: encrypting with key '2026-12'\n")
    refused = run_cli("encryption", "check", "--database-url", db_url, env={KEYS_ENV: K1})
    assert refused.returncode == 2
    assert "key '2026-12', which HOOKINBOX_ENCRYPTION_KEYS does not hold" in refused.stderr
    shown = run_cli("events", "show", "stripe", "evt_1", "--database-url", db_url)
    assert shown.returncode == 0 and '"stripe-signature"' in shown.stdout
    unreadable = run_cli("events", "show", "stripe", "evt_1", "--database-url", db_url,
                         env={KEYS_ENV: K1})  # fmt: skip
    assert unreadable.returncode == 2 and len(unreadable.stderr.splitlines()) == 1
    stderr = unreadable.stderr
    assert "error: event stripe/evt_1: its stored payload is encrypted with key" in stderr


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_compressed_event_shows_and_a_malformed_compression_setting_stops_the_worker(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEYS_ENV, raising=False)
    monkeypatch.setenv(COMPRESSION_ENV, "zlib")
    store = Store(db_url)
    store.ingest.record(delivery("evt_1"))
    store.dispose()
    assert raw(store)["evt_1"][1] == "@body"
    # Read with compression off: a reader needs no setting.
    shown = run_cli("events", "show", "stripe", "evt_1", "--database-url", db_url,
                    env={COMPRESSION_ENV: "off"})  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert '"stripe-signature"' in shown.stdout and "cus_0" in shown.stdout
    refused = run_cli("worker", APP, "--database-url", db_url, env={COMPRESSION_ENV: "gzip"})
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        "error: HOOKINBOX_COMPRESSION='gzip': not 'off', 'zlib' or 'zlib:LEVEL' (a level of 1-9)"
    ]
