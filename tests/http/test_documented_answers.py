"""Every answer written in docs/ingest.md and docs/redis-claims.md is one docs/openapi.yaml
allows: the same status, the same body shape, the same outcome names.

docs/openapi.yaml is itself held to the server by tests/reliability/test_openapi.py
(schemathesis against a running server); this keeps the prose pages from drifting from it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import yaml

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = ["ingest.md", "redis-claims.md"]
WITH_BODY = re.compile(r"`(\d{3}) (\{[^`]*\})`")
"""`401 {"status": "rejected", ...}`: a status and a JSON body, `...` for a value."""
SHORTHAND = re.compile(r"^\| `(\d{3}) ([a-z_]+)`")
"""`| `503 unavailable`` at the start of a table row: a status and an outcome."""


def openapi() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((DOCS / "openapi.yaml").read_text())
    return document


def responses() -> dict[str, Any]:
    """The answers of a delivery path: POST's, and the GET handshake's where POST has none
    (its 403)."""
    path = openapi()["paths"]["/webhooks/{source}"]
    answers: dict[str, Any] = {**path["get"]["responses"], **path["post"]["responses"]}
    return answers


def resolved(schema: Any, components: dict[str, Any]) -> Any:
    """`schema` with every `$ref` to `#/components/schemas/...` replaced by its target."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return resolved(components[schema["$ref"].rsplit("/", 1)[1]], components)
        return {key: resolved(value, components) for key, value in schema.items()}
    if isinstance(schema, list):
        return [resolved(item, components) for item in schema]
    return schema


def documented_bodies() -> list[tuple[str, str, str]]:
    found = []
    for page in PAGES:
        for status, body in WITH_BODY.findall((DOCS / page).read_text()):
            found.append((page, status, body))
    return found


def test_the_pages_state_answers_with_bodies() -> None:
    pages = {page for page, _, _ in documented_bodies()}
    assert pages == set(PAGES)  # the pattern still finds what the pages write


@pytest.mark.parametrize(("page", "status", "body"), documented_bodies())
def test_each_documented_body_matches_openapi(page: str, status: str, body: str) -> None:
    answers = responses()
    assert status in answers, f"{page}: {status} is not an answer of docs/openapi.yaml"
    content = answers[status].get("content", {})
    assert "application/json" in content, f"{page}: {status} has no JSON body in openapi.yaml"
    schema = resolved(content["application/json"]["schema"], openapi()["components"]["schemas"])
    instance = json.loads(body.replace("...", '"x"'))
    validator = jsonschema_rs.Draft4Validator(schema)
    errors = [error.message for error in validator.iter_errors(instance)]
    assert not errors, f"{page}: {status} {body} does not match openapi.yaml: {errors}"
    # The outcome is in `error` for a refusal (rejected, or retry), in `status` otherwise.
    refused = instance.get("status") in ("rejected", "retry")
    outcome = instance.get("error") if refused else instance.get("status")
    if outcome is not None:
        assert outcome in answers[status]["x-outcomes"], (page, status, outcome)


@pytest.mark.parametrize("page", PAGES)
def test_each_status_and_outcome_named_in_a_table_is_in_openapi(page: str) -> None:
    answers = responses()
    for line in (DOCS / page).read_text().splitlines():
        match = SHORTHAND.match(line)
        if match:
            status, outcome = match.groups()
            assert status in answers, (page, line)
            assert outcome in answers[status].get("x-outcomes", []), (page, line)
