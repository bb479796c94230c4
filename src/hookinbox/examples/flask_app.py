"""The example shop (hookinbox.examples.shop) in a Flask app.

    export SHOP_DATABASE_URL=sqlite:///shop.db
    flask --app hookinbox.examples.flask_app run                # POST /webhooks/<source>
    hookinbox worker hookinbox.examples.flask_app:inbox         # processes what was stored

Deliveries arrive through hookinbox's blueprint; GET /orders lists what the handlers made of
them. The worker is its own process: a WSGI server has no lifespan to start it in.
"""

from __future__ import annotations

from typing import Any

from flask import Flask

import hookinbox.flask
from hookinbox.examples.shop import all_orders, inbox

__all__ = ["app", "inbox"]

app = Flask(__name__)
app.register_blueprint(hookinbox.flask.blueprint(inbox))


@app.get("/orders")
def list_orders() -> list[dict[str, Any]]:
    return all_orders()
