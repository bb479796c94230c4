"""Flask: the blueprint and the view helper, on werkzeug's server, with a separate worker."""

from __future__ import annotations

import sys

import pytest
from flask import Flask

import hookinbox.flask
from hookinbox import Inbox
from tests.apps.basic import STRIPE_SECRET
from tests.frameworks.contract import check_contract, wait_for_order
from tests.support.server import free_port, serving
from tests.support.signing import stripe_delivery, stripe_event
from tests.support.workers import WorkerProcess


def test_a_view_of_your_own_answers_with_respond(inbox: Inbox) -> None:
    app = Flask(__name__)

    @app.post("/hooks/stripe-live")
    def stripe_live() -> object:
        return hookinbox.flask.respond(inbox, "stripe")

    client = app.test_client()
    headers, body = stripe_delivery(stripe_event("evt_view"), STRIPE_SECRET)
    response = client.post("/hooks/stripe-live", headers=headers, data=body)
    assert (response.status_code, response.json) == (
        200,
        {"status": "accepted", "event_id": "evt_view"},
    )
    stored = inbox.store.get_event("stripe", "evt_view")
    assert stored is not None and stored.body == body


@pytest.mark.slow
def test_the_example_app_over_http(db_url: str) -> None:
    port = free_port()
    command = [
        *(sys.executable, "-m", "flask", "--app", "hookinbox.examples.flask_app"),
        *("run", "--port", str(port)),
    ]
    env = {"SHOP_DATABASE_URL": db_url}
    worker = WorkerProcess(db_url, app="hookinbox.examples.flask_app:inbox", env=env)
    try:
        with serving(command, port, env=env, ready_path="/orders") as base_url:
            check_contract(base_url, db_url)
            order = wait_for_order(f"{base_url}/orders", "pi_fw_1")
    finally:
        worker.close()
    assert (order["amount"], order["email"]) == (1200, "zoë@example.com")
