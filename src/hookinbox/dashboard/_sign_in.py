"""Signing in and out, and the gate every other request passes.

A page (`SignIn.page`) is shown to a signed-in session only, anyone else being sent to the
login form; a POST (`SignIn.checked_form`) is refused (403) unless it comes from the
dashboard's own site, from a signed-in session, with that session's CSRF token. A session is
signed in only while the database has not recorded it signed out, so a copy of a cookie is
worth nothing once its operator signs out. The cookie, the CSRF comparison and the sign-in
rate limit themselves are `_auth.py`'s.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from datetime import timedelta

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from hookinbox.dashboard._auth import (
    COOKIE,
    SESSION_SECONDS,
    Session,
    SignInLimiter,
    client_address,
    cross_site,
    csrf_matches,
    mount_path,
)
from hookinbox.dashboard._context import Dashboard, utc_now
from hookinbox.dashboard._forms import read_form, refuse_nul

Handler = Callable[[Request], Awaitable[Response]]


class SignIn:
    def __init__(self, dashboard: Dashboard) -> None:
        self.dashboard = dashboard
        self.operations = dashboard.operations
        self.sessions = dashboard.sessions
        self.sign_ins = SignInLimiter()

    async def session(self, request: Request) -> Session | None:
        """The request's session; a signed-in one only if it was not signed out since (a
        look-up in the database: the cookie alone cannot know)."""
        session = self.sessions.read(request)
        if session is None or not session.authenticated:
            return session
        if await self.dashboard.off_loop(self.operations.session_revoked, session.sid):
            return None
        return session

    def page(self, handler: Callable[[Request, Session], Awaitable[Response]]) -> Handler:
        """A page for signed-in operators; anyone else is sent to the login form."""

        async def guarded(request: Request) -> Response:
            session = await self.session(request)
            if session is None or not session.authenticated:
                return self.dashboard.redirect(request, "/login")
            refuse_nul(request.query_params)
            return await handler(request, session)

        return guarded

    async def checked_form(self, request: Request, *, signed_in: bool = True) -> FormData:
        """A POST's form, refused (403) unless same-site, signed in and with the CSRF token."""
        if cross_site(request):
            raise HTTPException(403, "cross-site request refused")
        session = await self.session(request)
        if session is None or (signed_in and not session.authenticated):
            raise HTTPException(403, "not signed in (or the session expired): sign in again")
        form = await read_form(request)
        if not csrf_matches(session, form.get("csrf")):
            raise HTTPException(403, "missing or wrong CSRF token: reload the page and retry")
        refuse_nul(form)
        return form

    async def login_form(self, request: Request) -> Response:
        session = await self.session(request)
        if session is not None and session.authenticated:
            return self.dashboard.redirect(request, "/")
        if session is None:  # a session before sign-in, for the login form's CSRF token
            session = self.sessions.start(authenticated=False)
            response = self.dashboard.render(request, "login.html", session, error=None)
            self.sessions.save(request, response, session)
            return response
        return self.dashboard.render(request, "login.html", session, error=None)

    async def login(self, request: Request) -> Response:
        wait = self.sign_ins.attempt(client_address(request))
        if wait:
            retry_after = str(math.ceil(wait))
            raise HTTPException(
                429, "too many sign-in attempts: retry later", {"Retry-After": retry_after}
            )
        form = await self.checked_form(request, signed_in=False)
        given = form.get("token")
        if not isinstance(given, str) or not self.sessions.token_matches(given):
            session = self.sessions.read(request)
            return self.dashboard.render(request, "login.html", session, 401, error="Wrong token.")
        response = self.dashboard.redirect(request, "/")
        # A new session on sign-in: a CSRF token seen before it is worth nothing after.
        self.sessions.save(request, response, self.sessions.start(authenticated=True))
        return response

    async def logout(self, request: Request) -> Response:
        await self.checked_form(request)
        session = self.sessions.read(request)
        assert session is not None  # checked_form refused anything else
        now = utc_now()
        # Server-side: a copy of this cookie (a shared machine, a proxy's log) is worth nothing
        # from now on, in every process; deleting the cookie only tidies this browser.
        until, sid = now + timedelta(seconds=SESSION_SECONDS), session.sid
        await self.dashboard.off_loop(
            lambda: self.operations.revoke_session(sid, expires_at=until, now=now)
        )
        response = self.dashboard.redirect(request, "/login")
        response.delete_cookie(COOKIE, path=mount_path(request) + "/")
        return response
