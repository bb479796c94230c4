"""The Django view: `POST <prefix>/<source>` answered by hookinbox's receiver."""

from __future__ import annotations

from collections.abc import Callable

from django.db import DEFAULT_DB_ALIAS, transaction
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from hookinbox import BaseInbox
from hookinbox.django._inbox import DjangoInbox
from hookinbox.http import receive_stream

View = Callable[[HttpRequest, str], HttpResponse]


def webhook_view(inbox: BaseInbox) -> View:
    """A view for `path("webhooks/<str:source>", webhook_view(inbox))`.

    The body is read from the request stream with the inbox's cap (413 from Content-Length
    before a byte is read), never through `request.body`, and verified as it came. Providers
    sign their deliveries, so the view is exempt from CSRF; it answers 405 to anything but
    POST. It is never wrapped in ATOMIC_REQUESTS' transaction: the 200 must follow the commit
    of the delivery's own transaction, not precede the request's.
    """

    @csrf_exempt
    @require_POST
    def receive_webhook(request: HttpRequest, source: str) -> HttpResponse:
        reply = receive_stream(
            inbox, source, request.headers.items(), request.read, request.META.get("CONTENT_LENGTH")
        )
        return HttpResponse(
            reply.content,
            status=reply.status_code,
            headers=reply.headers,
            content_type=reply.media_type,
        )

    using = inbox.using if isinstance(inbox, DjangoInbox) else DEFAULT_DB_ALIAS
    view: View = transaction.non_atomic_requests(using=using)(receive_webhook)
    return view
