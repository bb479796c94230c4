"""Dashboard sessions end on the server; sign-in is rate-limited; weak tokens never start.

What it proves (issue 19, item 5), with real `hookinbox serve` processes on loopback:
- signing out revokes the session in the database: the cookie captured before sign-out no
  longer opens a page (GET) nor replays an event (POST with its CSRF token), whichever of two
  server processes answers, on SQLite and PostgreSQL;
- wrong-token sign-ins from one client are answered 401 for a burst, then 429 with
  `Retry-After`; another client address (127.0.0.2) still signs in meanwhile; once the wait
  is over, the first client signs in too;
- a token of repeated characters or a run (`aaaaaaaaaaaaaaaa`, `abcdabcdabcdabcd`,
  `0123456789abcdef`) stops `serve` and `hookinbox dashboard` at start-up with one line, exit 2,
  while thousands of `secrets.token_urlsafe` and `token_hex` tokens all pass.
"""

from __future__ import annotations

import math
import secrets
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from hookinbox._errors import ConfigurationError
from hookinbox.dashboard._auth import COOKIE, SIGN_IN_BURST, SIGN_IN_INTERVAL
from hookinbox.dashboard._token import check_token_strength
from tests.apps import guarded
from tests.dashboard.conftest import csrf_of
from tests.reliability._report import Trial, record
from tests.support.server import run_cli, running_server
from tests.support.signing import stripe_delivery

APP = "tests.apps.guarded:inbox"
WEAK = ("aaaaaaaaaaaaaaaa", "abcdabcdabcdabcd", "0123456789abcdef", "ab" * 12)


def _sign_in(client: httpx.Client, token: str) -> httpx.Response:
    csrf = csrf_of(client.get("/admin/login").text)
    return client.post("/admin/login", data={"token": token, "csrf": csrf})


def _deliver_one(base_url: str) -> str:
    event = {"id": "evt_session", "type": "invoice.paid", "created": int(time.time())}
    headers, body = stripe_delivery(event, guarded.STRIPE_SECRET)
    answer = httpx.post(f"{base_url}/webhooks/stripe", headers=headers, content=body)
    assert answer.status_code == 200, answer.text
    return "evt_session"


@pytest.mark.slow
def test_a_cookie_captured_before_sign_out_is_dead_after_it(db_url: str, backend: str) -> None:
    token = secrets.token_urlsafe(32)
    with running_server(APP, db_url, "--no-worker", "--admin-token", token, workers=2) as base:
        event_id = _deliver_one(base)
        with httpx.Client(base_url=base) as browser:
            assert _sign_in(browser, token).status_code == 303
            captured = browser.cookies[COOKIE]
            page = f"/admin/event/replay?source=stripe&id={event_id}"
            replay_csrf = csrf_of(browser.get(page).text)
            before = [browser.get("/admin/").status_code for _ in range(6)]
            out = browser.post("/admin/logout", data={"csrf": replay_csrf})
        assert before == [200] * 6 and out.status_code == 303
        with httpx.Client(base_url=base, cookies={COOKIE: captured}) as thief:
            gets = [thief.get("/admin/").status_code for _ in range(6)]
            form = {"csrf": replay_csrf, "source": "stripe", "id": event_id}
            posts = [thief.post("/admin/event/replay", data=form).status_code for _ in range(6)]
            logout_again = thief.post("/admin/logout", data={"csrf": replay_csrf}).status_code
        with httpx.Client(base_url=base) as browser:
            assert _sign_in(browser, token).status_code == 303  # signing in again still works
            assert browser.get("/admin/").status_code == 200
    assert gets == [303] * 6, gets  # sent to the login form
    assert posts == [403] * 6, posts
    assert logout_again == 403
    record(
        Trial(
            fault="dashboard cookie replayed after sign-out (2 server processes)",
            backend=backend,
            deliveries=len(gets) + len(posts) + 1,
            detail=f"before sign-out: GET 200x{len(before)}; after, with the captured cookie: "
            f"GET 303 to the login form x{len(gets)}, replay POST 403 x{len(posts)}, "
            "sign-out again 403; a new sign-in works",
        )
    )


@pytest.mark.slow
def test_sign_in_attempts_are_limited_per_client(tmp_path: Path) -> None:
    token = secrets.token_urlsafe(32)
    attempts = 3 * SIGN_IN_BURST
    database_url = f"sqlite:///{tmp_path / 'inbox.db'}"
    with running_server(APP, database_url, "--no-worker", "--admin-token", token) as base:
        with httpx.Client(base_url=base) as attacker:
            started = time.monotonic()
            answers = [_sign_in(attacker, secrets.token_urlsafe(32)) for _ in range(attempts)]
            elapsed = time.monotonic() - started
            limited_right = _sign_in(attacker, token)  # the right token is limited alike
            transport = httpx.HTTPTransport(local_address="127.0.0.2")
            with httpx.Client(base_url=base, transport=transport) as colleague:
                other_client = _sign_in(colleague, token)
            wait = int(limited_right.headers["retry-after"])
            time.sleep(wait)
            after_wait = _sign_in(attacker, token)
    statuses = [answer.status_code for answer in answers]
    refused = [answer for answer in answers if answer.status_code == 429]
    answered = statuses.count(401)
    # A burst, then one more per interval that passed meanwhile; never a 303 (wrong tokens).
    assert set(statuses) <= {401, 429}, statuses
    assert SIGN_IN_BURST <= answered <= SIGN_IN_BURST + math.ceil(elapsed / SIGN_IN_INTERVAL)
    assert refused and all(1 <= int(a.headers["retry-after"]) <= SIGN_IN_INTERVAL for a in refused)
    assert limited_right.status_code == 429
    assert other_client.status_code == 303
    assert after_wait.status_code == 303
    record(
        Trial(
            fault="wrong-token sign-ins from one client, as fast as it can",
            backend="sqlite",
            deliveries=attempts + 3,
            detail=f"{attempts} wrong tokens in {elapsed:.1f} s: 401x{answered}, then "
            f"429x{len(refused)} with Retry-After (1-{SIGN_IN_INTERVAL:.0f} s); the right "
            "token from that client 429 meanwhile, 303 from 127.0.0.2 and 303 after the wait",
        )
    )


@pytest.mark.slow
def test_a_weak_token_stops_the_server_at_start() -> None:
    runs = {f"serve {weak}": ("serve", APP, "--admin-token", weak) for weak in WEAK}
    runs |= {f"dashboard {weak}": ("dashboard", APP, "--admin-token", weak) for weak in WEAK[:2]}
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(run_cli, *args, env={}) for name, args in runs.items()}
        results = {name: future.result() for name, future in futures.items()}
    for name, result in results.items():
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, (name, result.stderr)
        assert lines[0].startswith("error: ") and "too regular" in lines[0], (name, lines)
    strong = [secrets.token_urlsafe(n) for n in (16, 24, 32, 48) for _ in range(500)]
    strong += [secrets.token_hex(16) for _ in range(1000)] + [str(uuid.uuid4()) for _ in range(500)]
    refused = []
    for candidate in strong:
        try:
            check_token_strength(candidate)
        except ConfigurationError:
            refused.append(candidate)
    assert refused == []
    record(
        Trial(
            fault="weak admin token (repeated characters, a run) at start-up",
            backend="-",
            deliveries=len(results) + len(strong),
            detail=f"{len(WEAK)} weak tokens: serve and dashboard exit 2, one line each; "
            f"{len(strong)} random tokens (token_urlsafe 16-48, token_hex 16, uuid4) accepted",
        )
    )


@pytest.mark.parametrize("weak", WEAK)
def test_check_token_strength_refuses(weak: str) -> None:
    with pytest.raises(ConfigurationError, match="too regular"):
        check_token_strength(weak)
