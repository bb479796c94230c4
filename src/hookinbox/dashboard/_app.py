"""The operator dashboard: an ASGI app of server-rendered pages over the operations service.

Every figure comes from the same operations as `hookinbox status`, `events` and `replay`
(`_operations/_service.py`); the dashboard only parses requests, checks the session and renders
templates. Pages work without JavaScript (there is none); state changes are POST forms carrying
a CSRF token.

This module only puts the app together; each idea has a module of its own: reading requests
(`_forms.py`), signing in and the gate before every page and form (`_sign_in.py`, over the
cookie and CSRF of `_auth.py`), the pages (`_pages.py`), the replays and erasures
(`_actions.py`), pausing sources (`_sources.py`), the headers every answer carries
(`_security_headers.py`), and what they all share: the operations behind the dashboard's cap
and the templates (`_context.py`, `_templates.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import Route
from starlette.types import ASGIApp

from hookinbox._errors import ConfigurationError, StoreUnavailable
from hookinbox._operations import Thresholds
from hookinbox._operations._service import Operations
from hookinbox._storage import Store
from hookinbox.dashboard._actions import Actions
from hookinbox.dashboard._context import Dashboard
from hookinbox.dashboard._pages import Pages
from hookinbox.dashboard._security_headers import SecurityHeaders
from hookinbox.dashboard._sign_in import SignIn
from hookinbox.dashboard._sources import Sources


def dashboard_app(
    store: Store,
    token: str,
    *,
    sources: Sequence[str] = (),
    thresholds: Thresholds | None = None,
) -> ASGIApp:
    """The dashboard over `store`, signed in with `token`; mount it (at `/admin`)."""
    return dashboard_for(Operations(store), token, sources=sources, thresholds=thresholds)


def dashboard_for(
    operations: Operations,
    token: str,
    *,
    sources: Sequence[str] = (),
    thresholds: Thresholds | None = None,
) -> ASGIApp:
    """`dashboard_app` over an operations service built already (`serve`'s, the inbox's; the
    `dashboard` command's, its database's), not a second one over the same store."""
    dashboard = Dashboard(operations, token, sources, thresholds or Thresholds())
    sign_in = SignIn(dashboard)
    pages = Pages(dashboard)
    actions = Actions(dashboard, sign_in)
    source_pages = Sources(dashboard, sign_in)
    page = sign_in.page
    routes = [
        Route("/", page(pages.overview), methods=["GET"]),
        Route("/login", sign_in.login_form, methods=["GET"]),
        Route("/login", sign_in.login, methods=["POST"]),
        Route("/logout", sign_in.logout, methods=["POST"]),
        Route("/events", page(pages.event_list), methods=["GET"]),
        Route("/charts", page(pages.charts), methods=["GET"]),
        Route("/event", page(pages.event_detail), methods=["GET"]),
        Route("/event/replay", page(pages.replay_confirm), methods=["GET"]),
        Route("/event/replay", actions.replay, methods=["POST"]),
        Route("/event/expunge", actions.expunge, methods=["POST"]),
        Route("/replay", page(pages.bulk_confirm), methods=["GET"]),
        Route("/replay", actions.bulk_replay, methods=["POST"]),
        Route("/expunge", page(pages.erase_confirm), methods=["GET"]),
        Route("/expunge", actions.bulk_expunge, methods=["POST"]),
        Route("/sources", page(source_pages.page), methods=["GET"]),
        Route("/sources/pause", source_pages.pause, methods=["POST"]),
        Route("/sources/resume", source_pages.resume, methods=["POST"]),
        Route("/dashboard.css", pages.stylesheet, methods=["GET"]),
    ]
    # A ConfigurationError here is an event no encryption key given decrypts: said, not a 500
    # without a word.
    handlers = {
        HTTPException: pages.error,
        StoreUnavailable: pages.error,
        ConfigurationError: pages.error,
    }
    return SecurityHeaders(Starlette(routes=routes, exception_handlers=handlers))
