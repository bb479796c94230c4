"""docs/tutorial.md followed as a reader follows it, in an empty directory, block by block:
each file block is written, each diff applied to its file, and each shell session typed: its
commands run (in bash, the directory and the exported variables carried from one command to
the next, as in a terminal) and every output line the page shows must be printed, in order.

A command whose shown output says to stop it with Ctrl+C is a server: it is started in the
background and waited for until it has printed what the page shows; starting the same
program again first stops the running one with SIGINT (the page's "Ctrl-C"). At the end the
dashboard the last step opens is signed in to with the token the page exported, and shows
the replayed event processed.

Where the test departs from the page, and why:
- The install lines (`python -m venv`, `. .venv/bin/activate`, `pip install`) are not run:
  this test environment stands for `.venv` (its bin directory first on PATH, hookinbox from
  this tree). That installing works as docs/install.md says is `make dist`'s test, and that
  the page's install line brings what its files import is tests/docs/test_installs.py's.
- Ports 8000 and 8001 are free ports of this test run's own (tests run in parallel).
- On PostgreSQL (the page's "On PostgreSQL"), the URL is a fresh database on the test server,
  which stands for `createdb shop`.
"""

from __future__ import annotations

import getpass
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx
import pytest

from tests.dashboard.conftest import csrf_of
from tests.docs.blocks import ROOT
from tests.support.server import free_port

pytestmark = pytest.mark.slow  # starts processes: not in `make test-fast`

PAGE = ROOT / "docs" / "tutorial.md"
POSTGRES_SECTION = "On PostgreSQL"
PAGE_DATABASE = "postgresql://postgres@localhost/shop"  # the page's example URL
APP_PORT, DASHBOARD_PORT = "8000", "8001"  # the ports the page's commands use by default

FENCE = re.compile(
    r"(?:^<!--\s*file:\s*(?P<file>\S+)\s*-->\n)?^```(?P<language>\w*)\n(?P<body>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
HEADING = re.compile(r"^#+ (.+)$", re.MULTILINE)
NOT_RUN = re.compile(r"^(python -m venv \.venv|\. \.venv/bin/activate|pip install .+|createdb .+)$")
"""The install lines, which this environment stands for (the module's docstring)."""
LOOKS_AGAIN = ("hookinbox events ", "curl ")
"""Commands that only read: a reader who looks too early, before the worker took the event,
looks again. Any other command runs once."""
COMMAND_TIMEOUT = 60
SERVER_START = 30
SERVER_STOP = 20
LOOK_AGAIN_FOR = 15
NEVER_SEEN = "the page shows a line the command never printed"


@dataclass
class Block:
    kind: str  # "file", "diff" or "session"
    heading: str  # the heading it is under
    body: str
    path: str = ""  # a file block's


@dataclass
class Command:
    line: str
    shown: list[str] = field(default_factory=list)  # the output lines the page shows


def page_blocks(text: str) -> list[Block]:
    """Every code block of the page, in order; a block of another kind fails the test, so
    that no block escapes being run."""
    headings = [(match.start(), match[1].strip()) for match in HEADING.finditer(text)]
    found = []
    for match in FENCE.finditer(text):
        heading = [title for at, title in headings if at < match.start()][-1]
        body, language = match["body"], match["language"]
        if match["file"] and language == "python":
            found.append(Block("file", heading, body, match["file"]))
        elif language == "diff":
            found.append(Block("diff", heading, body))
        elif language == "text" and body.startswith("$ "):
            found.append(Block("session", heading, body))
        else:
            raise AssertionError(f"a block under {heading!r} that the test cannot run: {body!r}")
    return found


def commands(session: str) -> list[Command]:
    typed: list[Command] = []
    for line in session.splitlines():
        if line.startswith("$ "):
            typed.append(Command(line[2:]))
        else:
            typed[-1].shown.append(line)
    return typed


def apply_diff(directory: Path, diff: str) -> None:
    """A one-hunk diff of whole lines: the `-` lines, found once in the file, become the `+`
    lines."""
    lines = diff.splitlines()
    assert lines[0].startswith("--- ") and lines[1].startswith("+++ "), diff
    target = directory / lines[0][4:].strip()
    removed = "".join(line[1:] + "\n" for line in lines[2:] if line.startswith("-"))
    added = "".join(line[1:] + "\n" for line in lines[2:] if line.startswith("+"))
    text = target.read_text()
    assert text.count(removed) == 1, f"{target.name} has not exactly once: {removed!r}"
    target.write_text(text.replace(removed, added))


TIME = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2})?")


def normal(line: str) -> str:
    """A line as compared: times and process ids masked (they differ on each run), columns'
    padding (it follows the widest value) collapsed."""
    line = TIME.sub("<time>", line)
    line = re.sub(r"\[\d+\]", "[pid]", line)
    return " ".join(line.split())


def missing(shown: list[str], printed: str) -> list[str]:
    """The shown lines not printed, in order (`...` stands for lines the page leaves out)."""
    wanted = [normal(line) for line in shown if line.strip() != "..."]
    got = iter(normal(line) for line in printed.splitlines())
    return [line for line in wanted if line not in got]  # `in` consumes: in order


@dataclass
class Terminal:
    """What a reader's terminals hold: a directory, exported variables, running servers."""

    cwd: Path
    env: dict[str, str]
    ports: dict[str, str]
    state: Path
    servers: dict[str, tuple[subprocess.Popen[str], IO[str]]] = field(default_factory=dict)
    logged: str = ""  # what the servers stopped so far printed

    def localise(self, text: str) -> str:
        for page_port, port in self.ports.items():
            text = text.replace(f"127.0.0.1:{page_port}", f"127.0.0.1:{port}")
        return text

    def command_line(self, line: str) -> str:
        """The page's command, on this run's ports (the programs' own defaults on the page)."""
        line = self.localise(line)
        if line.startswith("uvicorn "):
            line += f" --port {self.ports[APP_PORT]}"
        if line.startswith("hookinbox dashboard "):
            line += f" --port {self.ports[DASHBOARD_PORT]}"
        return line

    def type(self, command: Command) -> None:
        if NOT_RUN.match(command.line):
            return
        shown = [self.localise(line) for line in command.shown]
        if any("ctrl+c" in line.lower() for line in shown):
            self.start_server(self.command_line(command.line), shown)
            return
        deadline = time.monotonic() + LOOK_AGAIN_FOR
        while True:
            printed = self.run(self.command_line(command.line))
            absent = missing(shown, printed)
            if not absent or not command.line.startswith(LOOKS_AGAIN):
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert absent == [], f"$ {command.line}\n{NEVER_SEEN}: {absent}\nit printed:\n{printed}"

    def run(self, line: str) -> str:
        """Run one command as bash would in the terminal; carry its directory and exports."""
        script = 'cd "$1" && eval "$2"; status=$?; pwd > "$3/cwd"; env -0 > "$3/env"; exit $status'
        done = subprocess.run(
            ["bash", "-c", script, "bash", str(self.cwd), line, str(self.state)],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )
        assert done.returncode == 0, f"$ {line}\nexit {done.returncode}:\n{done.stdout}"
        self.cwd = Path((self.state / "cwd").read_text().strip())
        pairs = (item.partition("=") for item in (self.state / "env").read_text().split("\0"))
        self.env = {name: value for name, _, value in pairs if name}
        return done.stdout

    def start_server(self, line: str, shown: list[str]) -> None:
        program = " ".join(line.split()[:2])
        if program in self.servers:  # the reader's Ctrl-C in that terminal first
            self.stop(program)
        log = tempfile.TemporaryFile("w+")  # a file: a server never blocks on a full pipe
        process = subprocess.Popen(
            ["bash", "-c", 'cd "$1" && eval "exec $2"', "bash", str(self.cwd), line],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.servers[program] = (process, log)
        deadline = time.monotonic() + SERVER_START
        while absent := missing(shown, printed := _read(log)):
            assert process.poll() is None, f"$ {line}\nexited {process.returncode}:\n{printed}"
            assert time.monotonic() < deadline, f"$ {line}\n{NEVER_SEEN}: {absent}\n{printed}"
            time.sleep(0.1)

    def stop(self, program: str) -> None:
        process, log = self.servers.pop(program)
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=SERVER_STOP)
        except subprocess.TimeoutExpired as late:
            process.kill()
            process.wait()
            message = f"{program} ignored Ctrl-C for {SERVER_STOP} s:\n{_read(log)}"
            raise AssertionError(message) from late
        finally:
            self.logged += _read(log)
            log.close()
        assert process.returncode == 0, f"{program} stopped with {process.returncode}"

    def stop_all(self) -> None:
        for program in list(self.servers):
            self.stop(program)


def _read(log: IO[str]) -> str:
    log.seek(0)
    return log.read()


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PYTEST", "HOOKINBOX_DATABASE_URL", "HOOKINBOX_ADMIN_TOKEN"))
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT / "src")  # hookinbox as this tree has it
    state = tmp_path / "state"
    state.mkdir()
    home = tmp_path / "reader"
    home.mkdir()
    ports = {APP_PORT: str(free_port()), DASHBOARD_PORT: str(free_port())}
    terminal = Terminal(home, env, ports, state)
    try:
        yield terminal
    finally:
        for process, log in terminal.servers.values():  # a failed step left them running
            process.kill()
            process.wait()
            log.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_tutorial_runs_as_written(
    terminal: Terminal, backend: str, request: pytest.FixtureRequest
) -> None:
    database = request.getfixturevalue("empty_db_url") if backend == "postgres" else ""
    started = time.monotonic()
    blocks = page_blocks(PAGE.read_text())
    assert [block.kind for block in blocks].count("session") >= 8  # the page was read
    for block in blocks:
        if block.heading == POSTGRES_SECTION and backend != "postgres":
            continue
        if block.kind == "file":
            (terminal.cwd / block.path).write_text(terminal.localise(block.body))
        elif block.kind == "diff":
            apply_diff(terminal.cwd, block.body.replace(PAGE_DATABASE, database))
        else:
            for command in commands(block.body):
                terminal.type(command)

    assert "HOOKINBOX_ADMIN_TOKEN" in terminal.env  # the page's export reached the dashboard
    dashboard = f"http://127.0.0.1:{terminal.ports[DASHBOARD_PORT]}"
    with httpx.Client(base_url=dashboard, timeout=10) as browser:
        csrf = csrf_of(browser.get("/admin/login").text)
        token = terminal.env["HOOKINBOX_ADMIN_TOKEN"]
        assert browser.post("/admin/login", data={"token": token, "csrf": csrf}).status_code == 303
        listed = browser.get("/admin/events").text
        assert "evt_1" in listed and "evt_2" in listed
        detail = browser.get("/admin/event", params={"source": "stripe", "id": "evt_2"})
        assert detail.status_code == 200
        assert "processed" in detail.text and "replay" in detail.text
        assert getpass.getuser() in detail.text  # the replay's actor: "your user's name"
    terminal.stop_all()
    assert "KeyError: 'amount'" in terminal.logged  # "the app's terminal logged the attempt"
    if backend == "sqlite":
        assert (terminal.cwd / "shop.db").is_file()  # SQLite by default, as the page says
    else:
        assert not (terminal.cwd / "shop.db").exists()  # and nothing of it on PostgreSQL
    print(f"tutorial on {backend}: {time.monotonic() - started:.1f} s")


def test_the_test_sees_a_wrong_line() -> None:
    """The comparison fails a line the command did not print, and passes the page's masks."""
    printed = "received x\n2026-12-07 09:28:05  stripe  evt_2  failed   1\nINFO: process [77]\n"
    assert missing(["2026-01-01 00:00:00 stripe evt_2 failed 1", "..."], printed) == []
    assert missing(["INFO: process [4974]"], printed) == []
    assert missing(["2026-12-07 09:28:05 stripe evt_2 processed 1"], printed) != []
    assert missing(["INFO: process [77]", "received x"], printed) == ["received x"]  # order
