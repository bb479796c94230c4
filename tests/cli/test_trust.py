"""`hookinbox trust [APP] SOURCE --for 10m`: the window an Asana handshake is believed in,
opened by the command line in one process and used by an inbox in another (the database is
what they share); `--close`, `--forget`; no secret ever printed."""

from __future__ import annotations

import json
from pathlib import Path

from hookinbox import Inbox
from hookinbox.sources import Asana
from tests.support.server import run_cli

SECRET = "b537207f20cbfa02357cf448134da559e8bd39d61597dcd5631b8012eae53e81"


def test_a_window_opened_by_the_command_line_believes_one_handshake(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trust.db'}"
    inbox = Inbox(url, sources=[Asana()])
    inbox.migrate()
    try:
        refused = inbox.receive("asana", {"x-hook-secret": SECRET}, b"")
        opened = run_cli("trust", "asana", "--for", "10m", "--json", "--database-url", url)
        shaken = inbox.receive("asana", {"x-hook-secret": SECRET}, b"")
        closed = run_cli("trust", "asana", "--close", "--database-url", url)
        reopened = run_cli("trust", "asana", "--database-url", url)
        shown = run_cli("trust", "asana", "--close", "--json", "--database-url", url)
        forgotten = run_cli("trust", "asana", "--forget", "--json", "--database-url", url)
        too_long = run_cli("trust", "asana", "--for", "2d", "--database-url", url)
    finally:
        inbox.close()
    assert refused.status_code == 401
    assert opened.returncode == 0, opened.stderr
    assert json.loads(opened.stdout)["learned"] == 0
    assert shaken.status_code == 200 and shaken.headers["x-hook-secret"] == SECRET
    assert closed.stdout.strip() == "asana: no window was open"  # the handshake closed it
    assert "1 secret(s) learned so far" in reopened.stdout
    assert json.loads(shown.stdout) == {"source": "asana", "closed": True}
    assert json.loads(forgotten.stdout) == {"source": "asana", "forgotten": 1}
    assert too_long.returncode == 2 and "24h" in too_long.stderr
    for result in (opened, closed, reopened, shown, forgotten, too_long):
        assert SECRET not in result.stdout + result.stderr
