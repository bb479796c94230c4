"""The Flask and Django servers of the header tests: `python -m tests.http.header_servers
flask|django PORT`, serving every source of tests/http/header_sources.py on real WSGI servers
(werkzeug's, Django's own), which decode header bytes and join repeated headers themselves.

Environment: HEADER_DB_URL (the inbox's database), HEADER_PAYPAL_PEM (a file),
HEADER_SENDGRID_KEY (SendGrid's public key, base64).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from tests.http.header_sources import build_inbox

urlpatterns: list[Any] = []


def main(framework: str, port: int) -> None:
    inbox = build_inbox(
        os.environ["HEADER_DB_URL"],
        Path(os.environ["HEADER_PAYPAL_PEM"]).read_text(),
        os.environ["HEADER_SENDGRID_KEY"],
    )
    if framework == "flask":
        from flask import Flask
        from werkzeug.serving import run_simple

        import hookinbox.flask

        app = Flask(__name__)
        app.register_blueprint(hookinbox.flask.blueprint(inbox))
        run_simple("127.0.0.1", port, app, threaded=True)
        return
    from django.conf import settings

    settings.configure(
        DEBUG=False, ALLOWED_HOSTS=["*"], ROOT_URLCONF=__name__, SECRET_KEY="header-tests"
    )
    import django

    django.setup()
    from django.core.servers.basehttp import run
    from django.core.wsgi import get_wsgi_application
    from django.urls import path

    from hookinbox.django.views import webhook_view

    urlpatterns.append(path("webhooks/<str:source>", webhook_view(inbox)))
    run("127.0.0.1", port, get_wsgi_application(), threading=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
