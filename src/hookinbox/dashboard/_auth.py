"""The dashboard's session: a token login, a signed cookie, CSRF tokens, same-origin POSTs.

The cookie holds `{"auth": bool, "csrf": str, "sid": str}` signed (not encrypted: it holds no
secret) with a key derived from the admin token, so every server process of `serve --workers
N` accepts it, and changing the token signs everyone out. Signing out records the session id
in the database (`hookinbox_revoked_sessions`), so a copy of the cookie taken before is refused
by every process afterwards. Sign-in attempts are rate-limited per client (`SignInLimiter`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request
from starlette.responses import Response

from hookinbox.dashboard._token import check_token_strength

COOKIE = "hookinbox_admin"
SESSION_SECONDS = 12 * 3600
"""A login lasts a working day; then the token is asked for again."""


@dataclass(frozen=True, slots=True)
class Session:
    authenticated: bool
    csrf: str
    sid: str = ""
    """The session's id: what signing out revokes. Empty in a cookie from before sessions had
    one, which is then not signed in."""


class Sessions:
    def __init__(self, token: str) -> None:
        self._token = check_token_strength(token).encode()
        key = hmac.new(self._token, b"hookinbox dashboard session", hashlib.sha256).digest()
        self._serializer = URLSafeTimedSerializer(key, salt="hookinbox-dashboard")

    def token_matches(self, given: str) -> bool:
        """Constant time: the comparison leaks nothing about how much of the token matched."""
        return hmac.compare_digest(given.encode(), self._token)

    def read(self, request: Request) -> Session | None:
        cookie = request.cookies.get(COOKIE)
        if cookie is None:
            return None
        try:
            data = self._serializer.loads(cookie, max_age=SESSION_SECONDS)
        except BadSignature:  # also an expired one (SignatureExpired is a subclass)
            return None
        if not isinstance(data, dict) or not isinstance(data.get("csrf"), str):
            return None
        sid = data.get("sid")
        sid = sid if isinstance(sid, str) else ""
        return Session(data.get("auth") is True and bool(sid), data["csrf"], sid)

    @staticmethod
    def start(*, authenticated: bool) -> Session:
        """A new session with a new CSRF token and a new id."""
        return Session(authenticated, secrets.token_urlsafe(32), secrets.token_urlsafe(18))

    def save(self, request: Request, response: Response, session: Session) -> None:
        response.set_cookie(
            COOKIE,
            self._serializer.dumps(
                {"auth": session.authenticated, "csrf": session.csrf, "sid": session.sid}
            ),
            max_age=SESSION_SECONDS,
            path=mount_path(request) + "/",
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )


SIGN_IN_BURST = 10
"""Sign-in attempts a client may make at once..."""
SIGN_IN_INTERVAL = 6.0
"""...and then one more every this many seconds (10 a minute)."""
MAX_CLIENTS = 10_000
"""Clients remembered by one process; the least recently seen is forgotten first."""


class SignInLimiter:
    """A token bucket per client address, in this process: a burst, then one attempt every
    `interval` seconds. Every attempt counts, right or wrong, so the answer (429 or not) says
    nothing about the token."""

    def __init__(
        self,
        *,
        burst: int = SIGN_IN_BURST,
        interval: float = SIGN_IN_INTERVAL,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst = burst
        self.interval = interval
        self.max_clients = max_clients
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def attempt(self, client: str) -> float:
        """Take one attempt for `client`: 0 when allowed, else the seconds until the next."""
        now = self.clock()
        tokens, since = self._buckets.pop(client, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - since) / self.interval)
        allowed = tokens >= 1
        self._buckets[client] = (tokens - 1 if allowed else tokens, now)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        return 0.0 if allowed else (1 - tokens) * self.interval


def client_address(request: Request) -> str:
    """Who is signing in: the peer's address, or the X-Forwarded-For of a proxy uvicorn
    trusts (127.0.0.1, or the addresses in $FORWARDED_ALLOW_IPS)."""
    return request.client.host if request.client else "-"


def csrf_matches(session: Session | None, given: object) -> bool:
    if session is None or not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode(), session.csrf.encode())


def cross_site(request: Request) -> bool:
    """True for a request another site made the browser send: its Sec-Fetch-Site says so, or
    its Origin names another host. Clients that send neither (curl) still need the CSRF token."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return True
    origin = request.headers.get("origin")
    if origin is None:
        return False
    # The host, not the scheme: behind a TLS proxy the browser says https, the app sees http.
    return urlsplit(origin).netloc != request.headers.get("host", "")


def mount_path(request: Request) -> str:
    """Where the dashboard is mounted (`/admin`)."""
    return str(request.scope.get("root_path", "")).rstrip("/")
