"""The sign-in limiter's arithmetic on a manual clock: burst, refill, wait, memory bound."""

from __future__ import annotations

from hookinbox.dashboard._auth import SignInLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_one_attempt_per_interval() -> None:
    clock = Clock()
    limiter = SignInLimiter(burst=3, interval=6.0, clock=clock)
    assert [limiter.attempt("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.attempt("a") == 6.0  # empty: a whole interval to wait
    clock.now += 4.0
    assert limiter.attempt("a") == 2.0  # refused attempts do not push the wait further
    clock.now += 2.0
    assert limiter.attempt("a") == 0.0
    assert limiter.attempt("a") == 6.0
    assert limiter.attempt("b") == 0.0  # another client has its own bucket


def test_a_bucket_refills_to_the_burst_and_no_further() -> None:
    clock = Clock()
    limiter = SignInLimiter(burst=2, interval=1.0, clock=clock)
    limiter.attempt("a")
    clock.now += 3600
    assert [limiter.attempt("a") for _ in range(3)] == [0.0, 0.0, 1.0]


def test_memory_is_bounded_by_forgetting_the_least_recent_client() -> None:
    clock = Clock()
    limiter = SignInLimiter(burst=1, interval=60.0, max_clients=2, clock=clock)
    for client in ("a", "b"):
        limiter.attempt(client)
    assert limiter.attempt("a") > 0  # a is limited, and now the most recent
    limiter.attempt("c")  # b is forgotten
    assert limiter.attempt("a") > 0
    assert limiter.attempt("b") == 0.0  # a fresh bucket: forgotten, not limited
