"""The Django view: `POST <prefix>/<source>` answered by hookinbox's receiver, and `GET`/`HEAD`
by the source's handshake where its provider sends one."""

from __future__ import annotations

from collections.abc import Callable

from django.db import DEFAULT_DB_ALIAS, transaction
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from hookinbox import BaseInbox, Reply
from hookinbox.django._inbox import DjangoInbox
from hookinbox.http import Request

View = Callable[[HttpRequest, str], HttpResponse]


def webhook_view(inbox: BaseInbox) -> View:
    """A view for `path("webhooks/<str:source>", webhook_view(inbox))`.

    The body is read from the request stream with the inbox's cap (413 from Content-Length
    before a byte is read), never through `request.body`, and verified as it came. Providers
    sign their deliveries, so the view is exempt from CSRF. A GET or HEAD is the source's
    handshake (405 where it has none), and so is an OPTIONS (Event Grid's CloudEvents
    validation), any other method 405. It is never wrapped in
    ATOMIC_REQUESTS' transaction: the 200 must follow the commit of the delivery's own
    transaction, not precede the request's.
    """

    @csrf_exempt
    @require_http_methods(["GET", "HEAD", "OPTIONS", "POST"])
    def receive_webhook(request: HttpRequest, source: str) -> HttpResponse:
        reply = inbox.handle(
            Request(
                request.method or "GET", source, request.headers.items(),
                request.META.get("QUERY_STRING", ""), request.read,
                request.META.get("CONTENT_LENGTH"),
            )
        )  # fmt: skip
        return _response(reply)

    using = inbox.using if isinstance(inbox, DjangoInbox) else DEFAULT_DB_ALIAS
    view: View = transaction.non_atomic_requests(using=using)(receive_webhook)
    return view


def _response(reply: Reply) -> HttpResponse:
    return HttpResponse(
        reply.content, status=reply.status_code, headers=reply.headers,
        content_type=reply.media_type,
    )  # fmt: skip
