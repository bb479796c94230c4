"""The trust gateway (`Store.trust`) on every database: a window believes one first
handshake and closes; outside it nothing is kept; of two racing handshakes exactly one is
believed; the secrets are read back by any store of the same database (another process)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from hookinbox._storage import Store
from hookinbox._storage._trust import MAX_LEARNED


def test_a_window_believes_one_handshake_then_closes(store: Store, db_url: str) -> None:
    assert store.trust.learn("asana", "a" * 64) is False  # no window: nothing kept
    store.trust.open_window("asana", timedelta(minutes=10))
    assert store.trust.learn("other-source", "b" * 64) is False  # another source's window
    assert store.trust.learn("asana", "a" * 64) is True
    assert store.trust.learn("asana", "c" * 64) is False  # closed by the first
    other = Store(db_url)  # another process's store: the same secrets
    try:
        assert other.trust.secrets("asana") == ["a" * 64]
    finally:
        other.dispose()
    assert store.trust.forget("asana") == 1
    assert store.trust.secrets("asana") == []


def test_a_window_past_its_time_or_closed_believes_nothing(store: Store) -> None:
    store.trust.open_window("asana", timedelta(microseconds=1))
    # The database's clock has moved past a microsecond by the next statement.
    assert store.trust.learn("asana", "a" * 64) is False
    store.trust.open_window("asana", timedelta(minutes=10))
    assert store.trust.close_window("asana") is True
    assert store.trust.close_window("asana") is False
    assert store.trust.learn("asana", "a" * 64) is False
    assert store.trust.secrets("asana") == []


def test_two_racing_handshakes_one_believed(store: Store) -> None:
    store.trust.open_window("asana", timedelta(minutes=10))
    results: list[bool] = []
    start = threading.Barrier(2)

    def handshake(secret: str) -> None:
        start.wait()
        results.append(store.trust.learn("asana", secret))

    threads = [threading.Thread(target=handshake, args=(s * 64,)) for s in "de"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, True]
    assert len(store.trust.secrets("asana")) == 1


def test_a_source_keeps_at_most_its_limit_of_secrets(store: Store) -> None:
    for n in range(MAX_LEARNED):
        store.trust.open_window("asana", timedelta(minutes=1))
        assert store.trust.learn("asana", f"{n:064x}")
    store.trust.open_window("asana", timedelta(minutes=1))
    assert store.trust.learn("asana", "f" * 64) is False
    assert len(store.trust.secrets("asana")) == MAX_LEARNED


@pytest.mark.parametrize("secret", ["a" * 64])
def test_the_same_handshake_again_in_a_new_window_keeps_one_row(store: Store, secret: str) -> None:
    for _ in range(2):
        store.trust.open_window("asana", timedelta(minutes=1))
        assert store.trust.learn("asana", secret)
    assert store.trust.secrets("asana") == [secret]
