"""The dashboard is off without a token and never reachable through the webhook routes.

What it proves, on real servers on loopback:
- `hookinbox serve` without an admin token has no `/admin` at all: every dashboard path
  answers 404, for GET and POST;
- with a token (`--admin-token`), the dashboard answers at /admin (the control); a wrong token
  (empty, one character short or long, another case, same length) is refused 401, signs
  nobody in and is not echoed back; the right one signs in;
- the webhook routes never serve dashboard content or set a session cookie, signed in or not:
  `/webhooks/admin`, `/webhooks/admin/`, `/webhooks/admin/login`, dot segments raw and
  percent-encoded (`%2e%2e`, `..%2F`), doubled slashes, an encoded letter; the same under a
  prefix, with serve's app mounted at /hooks in another Starlette app (uvicorn --factory);
- a token that is blank, or too short, stops `serve` and `hookinbox dashboard` at start-up
  (exit 2, one line).
That the token is compared in constant time is held by the AST check in
test_signature_edges.py (`Sessions.token_matches` uses `hmac.compare_digest`).

How: requests go through `http.client`, which sends a path exactly as written (httpx would
normalise the dot segments away before they reached the server).
"""

from __future__ import annotations

import http.client
import re
import secrets
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from hookinbox.dashboard._token import ADMIN_TOKEN_ENV
from tests.apps import guarded
from tests.reliability._report import Trial, record
from tests.support.server import free_port, hookinbox_command, run_cli, serving

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

APP = "tests.apps.guarded:inbox"
DASHBOARD_PATHS = ["/admin", "/admin/", "/admin/login", "/admin/events", "/admin/dashboard.css"]
HOSTILE_SUFFIXES = [
    "admin", "admin/", "admin/login", "admin/events", "admin/dashboard.css",
    "%2e%2e/admin/", "%2e%2e/admin/login", "%2E%2E/admin/login", "..%2Fadmin", "..%2Fadmin/",
    "..%2Fadmin/login", "..%2fadmin%2flogin", "../admin/login", "./../admin/login",
    "/admin/login", "%61dmin/login", "admin%2Flogin", "..;/admin/login",
]  # fmt: skip
"""Appended to a webhook prefix (`/webhooks/`): each must stay out of the dashboard."""
DASHBOARD_SIGNS = ("<form", "Sign in", "csrf", "hookinbox_admin", "<html", "dashboard.css")


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: str

    def is_dashboard(self) -> bool:
        """Dashboard content or a session cookie, whatever the status."""
        return (
            "set-cookie" in self.headers
            or self.headers.get("content-type", "").startswith(("text/html", "text/css"))
            or any(sign in self.body for sign in DASHBOARD_SIGNS)
        )


def request(
    base_url: str, method: str, path: str, *, body: str = "", headers: dict[str, str] | None = None
) -> Answer:
    """One request with `path` sent byte for byte as given."""
    host = urlsplit(base_url)
    connection = http.client.HTTPConnection(host.hostname or "", host.port, timeout=30)
    try:
        sent = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
        connection.request(method, path, body=body.encode(), headers=sent)
        response = connection.getresponse()
        answer_headers = {name.lower(): value for name, value in response.getheaders()}
        return Answer(response.status, answer_headers, response.read().decode("utf-8", "replace"))
    finally:
        connection.close()


@contextmanager
def serve(database_url: str, *extra: str, token_env: str = "") -> Iterator[str]:
    port = free_port()
    command = hookinbox_command(
        "serve", APP, "--database-url", database_url, "--port", str(port),
        "--log-level", "warning", "--no-worker", *extra,
    )  # fmt: skip
    with serving(command, port, env={ADMIN_TOKEN_ENV: token_env}) as base_url:
        yield base_url


@contextmanager
def serve_mounted(database_url: str, token: str) -> Iterator[str]:
    """serve's app with the dashboard, mounted at /hooks in another app, under uvicorn."""
    port = free_port()
    command = [
        sys.executable, "-m", "uvicorn", "--factory", "tests.apps.guarded:mounted",
        "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    env = {ADMIN_TOKEN_ENV: token, "HOOKINBOX_DATABASE_URL": database_url}
    with serving(command, port, env=env, ready_path=guarded.MOUNT + "/readyz") as base_url:
        yield base_url


def csrf_and_cookie(answer: Answer) -> tuple[str, str]:
    found = re.search(r'name="csrf" value="([^"]+)"', answer.body)
    assert found is not None and "set-cookie" in answer.headers, answer
    return found.group(1), answer.headers["set-cookie"].split(";", 1)[0]


def sign_in(base_url: str, admin: str, token: str) -> tuple[Answer, str]:
    """POST the login form as a browser would; the answer and the cookie it holds after."""
    csrf, cookie = csrf_and_cookie(request(base_url, "GET", f"{admin}/login"))
    form = f"token={token}&csrf={csrf}"
    answer = request(base_url, "POST", f"{admin}/login", body=form, headers={"Cookie": cookie})
    new_cookie = answer.headers.get("set-cookie", cookie).split(";", 1)[0]
    return answer, new_cookie


def probe(
    base_url: str, prefix: str, cookie: str, *, by_design: Callable[[str], bool] = lambda _: False
) -> tuple[int, list[str]]:
    """Every hostile path under `prefix`, GET and POST, with and without the session; the
    ones that reached the dashboard. `by_design` names paths that are the dashboard's own."""
    tried = 0
    reached = []
    for suffix in HOSTILE_SUFFIXES:
        path = prefix + suffix
        if by_design(unquote(path)):
            continue
        for method in ("GET", "POST"):
            for headers in ({}, {"Cookie": cookie} if cookie else {}):
                tried += 1
                answer = request(base_url, method, path, headers=headers, body="token=x&csrf=y")
                if answer.is_dashboard() or answer.status < 300:
                    reached.append(f"{method} {path} -> {answer.status} {answer.body[:80]!r}")
    return tried, reached


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'inbox.db'}"


def test_no_token_no_admin_at_all(tmp_path: Path) -> None:
    with serve(sqlite_url(tmp_path)) as base_url:
        answers = {
            (method, path): request(base_url, method, path)
            for path in DASHBOARD_PATHS
            for method in ("GET", "POST")
        }
        tried, reached = probe(base_url, "/webhooks/", cookie="")
    assert {key: a.status for key, a in answers.items() if a.status != 404} == {}
    assert [key for key, a in answers.items() if a.is_dashboard()] == []
    assert reached == []
    record(
        Trial(
            fault="dashboard paths on a server without an admin token",
            backend="sqlite",
            deliveries=len(answers) + tried,
            doubled=len(reached),
            detail=f"{len(answers)} /admin requests: all 404; {tried} webhook-route "
            "variants: none served the dashboard",
        )
    )


def test_wrong_tokens_are_refused_and_webhook_routes_never_reach_the_dashboard(
    tmp_path: Path,
) -> None:
    token = secrets.token_urlsafe(32)
    wrong = ["", token[:-1], token + "x", token.swapcase(), secrets.token_urlsafe(32)]
    with serve(sqlite_url(tmp_path), "--admin-token", token) as base_url:
        control = request(base_url, "GET", "/admin/login")
        refusals = [sign_in(base_url, "/admin", attempt) for attempt in wrong]
        after_wrong = [
            request(base_url, "GET", "/admin/", headers={"Cookie": c}) for _, c in refusals
        ]
        signed_in, cookie = sign_in(base_url, "/admin", token)
        overview = request(base_url, "GET", "/admin/", headers={"Cookie": cookie})
        tried, reached = probe(base_url, "/webhooks/", cookie)
    assert control.status == 200 and control.is_dashboard()  # the dashboard is there
    assert [answer.status for answer, _ in refusals] == [401] * len(wrong)
    assert all("Wrong token." in answer.body for answer, _ in refusals)
    leaked = [
        attempt
        for attempt, (answer, _) in zip(wrong, refusals, strict=True)
        if attempt and attempt in answer.body
    ]
    assert leaked == [], "a submitted token was echoed back"
    assert [a.status for a in after_wrong] == [303] * len(wrong)  # back to the login form
    assert signed_in.status == 303 and overview.status == 200 and "Overview" in overview.body
    assert reached == [], "\n".join(reached)
    record(
        Trial(
            fault="wrong admin tokens; webhook routes toward /admin, signed in",
            backend="sqlite",
            deliveries=len(wrong) + 1 + tried,
            doubled=len(reached) + sum(a.status != 303 for a in after_wrong),
            detail=f"{len(wrong)} wrong tokens: 401, nobody signed in; {tried} hostile "
            "webhook paths (GET/POST, with and without the session): none served the "
            "dashboard or set a cookie",
        )
    )


def test_mounted_under_a_prefix_the_webhook_routes_still_stay_out(tmp_path: Path) -> None:
    token = secrets.token_urlsafe(32)
    admin = guarded.MOUNT + "/admin"
    with serve_mounted(sqlite_url(tmp_path), token) as base_url:
        signed_in, cookie = sign_in(base_url, admin, token)
        overview = request(base_url, "GET", admin + "/", headers={"Cookie": cookie})
        tried, reached = probe(base_url, guarded.MOUNT + "/webhooks/", cookie)
        # Mounted, `/hooks/{source}` is a webhook route too, beside the dashboard at
        # `/hooks/admin/`: the variants that decode to the dashboard's own paths are skipped.
        tried_bare, reached_bare = probe(
            base_url, guarded.MOUNT + "/", cookie, by_design=lambda p: p.startswith(admin + "/")
        )
    assert signed_in.status == 303 and overview.status == 200  # the control
    assert reached == [] and reached_bare == [], "\n".join(reached + reached_bare)
    record(
        Trial(
            fault="webhook routes toward /admin with the app mounted at /hooks",
            backend="sqlite",
            deliveries=tried + tried_bare + 1,
            doubled=len(reached) + len(reached_bare),
            detail=f"{tried + tried_bare} hostile paths under /hooks/webhooks/ and /hooks/: "
            "none served the dashboard or set a cookie",
        )
    )


def test_a_blank_or_short_token_stops_the_server_at_start() -> None:
    runs = {  # concurrently: each is a Python start-up
        "serve, blank token": (("serve", APP, "--admin-token", " " * 40), {}),
        "serve, short token": (("serve", APP, "--admin-token", "short-token"), {}),
        "dashboard, blank token": (("dashboard", APP), {ADMIN_TOKEN_ENV: "\t" * 20}),
        "dashboard, no token": (("dashboard", APP), {ADMIN_TOKEN_ENV: ""}),
    }
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = {name: pool.submit(run_cli, *args, env=env) for name, (args, env) in runs.items()}
        results = {name: future.result() for name, future in futures.items()}
    for name, result in results.items():
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, (name, result.stderr)
        assert lines[0].startswith("error: ") and "token" in lines[0], (name, lines)
    record(
        Trial(
            fault="blank, short or missing admin token at start-up",
            backend="-",
            deliveries=len(results),
            doubled=sum(result.returncode != 2 for result in results.values()),  # started
            detail="serve and dashboard: exit 2, one line each",
        )
    )
