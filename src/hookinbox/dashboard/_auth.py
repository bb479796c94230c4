"""The dashboard's session: a token login, a signed cookie, CSRF tokens, same-origin POSTs.

The cookie holds `{"auth": bool, "csrf": str}` signed (not encrypted: it holds no secret) with a
key derived from the admin token, so every server process of `serve --workers N` accepts it,
and changing the token signs everyone out.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
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
        return Session(data.get("auth") is True, data["csrf"])

    @staticmethod
    def start(*, authenticated: bool) -> Session:
        """A new session with a new CSRF token."""
        return Session(authenticated, secrets.token_urlsafe(32))

    def save(self, request: Request, response: Response, session: Session) -> None:
        response.set_cookie(
            COOKIE,
            self._serializer.dumps({"auth": session.authenticated, "csrf": session.csrf}),
            max_age=SESSION_SECONDS,
            path=mount_path(request) + "/",
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )


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
