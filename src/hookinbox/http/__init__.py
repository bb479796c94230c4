"""HTTP: what a framework adapter is built on.

An adapter reads the delivery's raw body with the inbox's cap and answers what the inbox
decided; it never parses the body, never chooses a status code:

    reply = await receive_asgi(inbox, source, scope["headers"], receive)      # ASGI
    reply = receive_stream(inbox, source, headers, stream.read, content_length)  # WSGI

    respond(reply.status_code, reply.headers, reply.content, reply.media_type)

`hookinbox.fastapi`, `hookinbox.flask` and `hookinbox.django` are written on these two
functions only. `inbox.asgi()` is the complete ASGI app (deliveries, probes, metrics).
"""

from hookinbox.http._app import receive_asgi
from hookinbox.http._blocking import receive_stream

__all__ = ["receive_asgi", "receive_stream"]
