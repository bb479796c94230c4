"""The sources page: which sources are paused (who, when, why, how many events parked), and
the forms that pause and resume one, as `hookinbox pause` and `resume` do.

The page lists the sources the dashboard was given (the inbox's; without them, those with
stored events) and the paused ones. Each form is a POST through `SignIn.checked_form` (same
site, signed in, the CSRF token), audited with the actor "dashboard" and the operator's
reason; a source the dashboard knows by none of those ways is refused (404).
"""

from __future__ import annotations

from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from hookinbox.dashboard._actions import actor_of
from hookinbox.dashboard._auth import Session
from hookinbox.dashboard._context import Dashboard, utc_now
from hookinbox.dashboard._forms import bad_request
from hookinbox.dashboard._sign_in import SignIn


class Sources:
    def __init__(self, dashboard: Dashboard, sign_in: SignIn) -> None:
        self.dashboard = dashboard
        self.operations = dashboard.operations
        self.sign_in = sign_in

    async def page(self, request: Request, session: Session) -> Response:
        def read() -> tuple[list[str], dict[str, object], dict[str, int]]:
            operations = self.operations
            paused = {p.source: p for p in operations.paused_sources()}
            # The app's sources when the dashboard has them; else a scan of the events' index
            # (`hookinbox dashboard` without APP), as its filters' hints do.
            configured = self.dashboard.sources or operations.known_sources()
            names = sorted({*configured, *paused})
            parked = {name: operations.parked_count(name) for name in paused}
            return names, dict(paused), parked

        names, paused, parked = await self.dashboard.off_loop(read)
        done = request.query_params.get("done")
        return self.dashboard.render(
            request, "sources.html", session, names=names, paused=paused, parked=parked,
            done=done if done in ("paused", "resumed") else None,
            changed=request.query_params.get("source"),
        )  # fmt: skip

    async def pause(self, request: Request) -> Response:
        return await self._change(request, pause=True)

    async def resume(self, request: Request) -> Response:
        return await self._change(request, pause=False)

    async def _change(self, request: Request, *, pause: bool) -> Response:
        form = await self.sign_in.checked_form(request)
        source = form.get("source")
        if not isinstance(source, str) or not source:
            raise bad_request("give source")
        actor = actor_of(form)
        operations = self.operations

        def change() -> bool:
            known = (
                source in self.dashboard.sources
                or operations.source_exists(source)
                or any(p.source == source for p in operations.paused_sources())
            )
            if not known:
                return False
            if pause:
                operations.pause(source, utc_now(), actor=actor)
            else:
                operations.resume(source, utc_now(), actor=actor)
            return True

        if not await self.dashboard.off_loop(change):
            raise HTTPException(404, f"no source is named {source!r}")
        response = self.dashboard.redirect(request, "/sources")
        done = "paused" if pause else "resumed"
        response.headers["location"] += f"?{QueryParams({'source': source, 'done': done})}"
        return response
