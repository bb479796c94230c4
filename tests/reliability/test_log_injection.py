"""A request's text never forges a log line or reaches the terminal raw (issue 31, item 9).

A real `hookinbox serve` writes its text log (the default format) to a file. Requests whose
path decodes to an escape sequence (`%1b]0;PWNED%07`: retitle the terminal; `%1b[2J`: wipe it)
or to a line break followed by a line of the log's own form (`%0a...accepted 200`) are answered
404, and the log has one line per request: the control characters written as `\\x1b`, `\\x07`,
`\\x0a`, never as themselves. The JSON log (`--log-format json`) escaped them already, in
`json.dumps`; the text log now escapes the same characters in every value a record carries.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.apps import orders
from tests.reliability._report import Trial, record
from tests.support.server import free_port, hookinbox_command, serving_logged

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

FORGED = "2026-01-01 00:00:00,000 INFO    hookinbox.ingest: stripe evt_forged (x): accepted 200"
PATHS = {
    "escape sequences": "/webhooks/%1b%5d0;PWNED%07%1b%5b2J",
    "a forged line": "/webhooks/x%0a" + FORGED.replace(" ", "%20"),
    "a carriage return and a bidi override": "/webhooks/y%0d%e2%80%aeevil",
}


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_hostile_path_is_one_escaped_log_line(tmp_path: Path, log_format: str) -> None:
    # The log does not depend on the database: SQLite only.
    db_url = f"sqlite:///{tmp_path}/log.db"
    orders.create_tables(db_url)
    port = free_port()
    command = hookinbox_command(
        "serve", "tests.apps.orders:inbox", "--database-url", db_url, "--port", str(port),
        "--log-format", log_format, "--log-level", "info",
    )  # fmt: skip
    with serving_logged(command, port) as (base_url, written):
        with httpx.Client(base_url=base_url) as client:
            answers = [client.post(path, content=b"{}").status_code for path in PATHS.values()]
    logged = written()

    assert answers == [404] * len(PATHS)
    lines = [line for line in logged.splitlines() if "unknown_source" in line]
    assert len(lines) == len(PATHS), logged  # one line per request, none split in two
    assert not set(logged) & {"\x1b", "\x07", "\r", "\u202e"}, repr(logged)
    assert not any(line.startswith(FORGED[:10]) for line in logged.splitlines())
    if log_format == "json":
        messages = [json.loads(line)["message"] for line in lines]
    else:
        messages = lines
    assert "\\x1b]0;PWNED\\x07\\x1b[2J" in messages[0]
    assert "x\\x0a2026-01-01" in messages[1]
    assert "y\\x0d\\u202eevil" in messages[2]
    record(
        Trial(
            fault=f"control characters in a request's path, {log_format} log",
            backend="sqlite",
            deliveries=len(PATHS),
            detail="escape sequences, a %0a forged line, CR and U+202E: 404 each, one log line "
            "each, every control written as \\xNN or \\uNNNN",
        )
    )
