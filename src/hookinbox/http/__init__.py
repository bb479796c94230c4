"""HTTP: the ASGI app that receives deliveries."""

from hookinbox.http._app import create_app, read_body

__all__ = ["create_app", "read_body"]
