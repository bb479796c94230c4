"""`broker_url`: each shared test runs on RabbitMQ and on JetStream."""

from __future__ import annotations

import pytest


@pytest.fixture(
    params=[
        pytest.param("rabbitmq", marks=pytest.mark.rabbitmq),
        pytest.param("jetstream", marks=pytest.mark.nats),
    ]
)
def broker_url(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(kind, URL) of a reachable broker: RabbitMQ's, then NATS JetStream's."""
    fixture = "rabbitmq_url" if request.param == "rabbitmq" else "nats_url"
    return request.param, request.getfixturevalue(fixture)
