"""Flask: a blueprint that receives deliveries, or one call for a view of your own.

    app.register_blueprint(hookinbox.flask.blueprint(inbox))     # POST /webhooks/<source>

`GET` (and `HEAD`) `/webhooks/<source>` answer the handshake of a source whose provider sends
one over GET (Meta, Dropbox, X, Okta, Trello), 405 for the others (`handshake`); `OPTIONS`
that of a source which answers one (Event Grid's CloudEvents validation), 405 otherwise.

The body is read from `request.stream`, never from `request.get_data()` or `request.json`: a
body whose Content-Length passes the inbox's cap is refused (413) before a byte is read, and a
chunked one as soon as it passes the cap. The bytes are verified exactly as they came. Storage
is synchronous, so the view runs in the WSGI server's own worker thread or process.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from hookinbox import BaseInbox, Reply
from hookinbox.http import Request

__all__ = ["blueprint", "handshake", "receive", "respond"]


def blueprint(
    inbox: BaseInbox, *, name: str = "hookinbox", url_prefix: str = "/webhooks"
) -> Blueprint:
    """A blueprint with `POST {url_prefix}/<source>` for every source of `inbox`, and `GET`
    (Flask adds `HEAD`) for their handshakes."""
    webhooks = Blueprint(name, __name__, url_prefix=url_prefix.rstrip("/"))

    # Flask would answer OPTIONS itself on every route: the inbox answers it instead (Event
    # Grid's CloudEvents validation; 405 for a source without one).
    @webhooks.post("/<source>", provide_automatic_options=False)
    def receive_webhook(source: str) -> Response:
        return respond(inbox, source)

    @webhooks.get("/<source>", provide_automatic_options=False)
    def answer_handshake(source: str) -> Response:
        return handshake(inbox, source)

    @webhooks.route("/<source>", methods=["OPTIONS"], provide_automatic_options=False)
    def answer_options(source: str) -> Response:
        return _response(inbox.handle(_request("OPTIONS", source)))

    return webhooks


def handshake(inbox: BaseInbox, source: str) -> Response:
    """The current GET or HEAD request answered: the source's handshake, or 405."""
    return _response(inbox.handle(_request("GET", source)))


def receive(inbox: BaseInbox, source: str) -> Reply:
    """Read the current request's raw body with the cap, verify and store it."""
    return inbox.handle(_request("POST", source))


def _request(method: str, source: str) -> Request:
    """The current request as the pipeline takes it: its stream, never `get_data()`."""
    return Request(
        method,
        source,
        request.headers.items(),
        request.query_string,
        request.stream.read,
        request.headers.get("Content-Length"),
    )


def respond(inbox: BaseInbox, source: str) -> Response:
    """`receive`, answered as the provider expects: JSON body, status code and headers."""
    return _response(receive(inbox, source))


def _response(reply: Reply) -> Response:
    return Response(
        reply.content, reply.status_code, headers=reply.headers, content_type=reply.media_type
    )
