"""The pages' templates: one Jinja environment, and what every page is given.

Autoescaping is on, and every `{{ ... }}` passes through `_printable`, so text a provider or
an operator wrote (a body, a header, an error, a reason) can neither break a page nor
disguise itself. Besides its own context, each page is given where the dashboard is mounted,
the session's CSRF token, whether it is signed in, the statuses, and the sources the inbox
knows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from hookinbox._model import Status
from hookinbox._text import printable
from hookinbox.dashboard._auth import Session, mount_path


def _printable(value: Any) -> Any:
    """Every `{{ ... }}` passes here: a body, header, error or reason may hold a lone
    surrogate or a NUL, which would make the page unencodable (a 500), or a bidi override
    (U+202E) that would show what follows it reversed; they are shown escaped instead, with
    every other control character (`hookinbox._text.printable`)."""
    if not isinstance(value, str):
        return value
    if hasattr(value, "__html__"):  # markup already escaped (the chart): keep it markup
        return type(value)(printable(str(value)))
    return printable(value)


_templates = jinja2.Environment(
    loader=jinja2.PackageLoader("hookinbox.dashboard", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    finalize=_printable,
)


def _age(since: datetime | None, now: datetime) -> str:
    if since is None:
        return "-"
    seconds = (now - since).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


_templates.filters["age"] = _age
_templates.filters["when"] = lambda t: "-" if t is None else t.strftime("%Y-%m-%d %H:%M:%S")


def render(
    request: Request,
    name: str,
    session: Session | None,
    status_code: int = 200,
    *,
    known_sources: Sequence[str],
    **context: Any,
) -> HTMLResponse:
    """The page `name` (a template) with `context`, answered with `status_code`."""
    html = _templates.get_template(name).render(
        base=mount_path(request),
        csrf=session.csrf if session else "",
        signed_in=bool(session and session.authenticated),
        statuses=[s.value for s in Status],
        known_sources=known_sources,
        **context,
    )
    return HTMLResponse(html, status_code)
