"""A throwaway PostgreSQL cluster for tests that stop, crash and restart the database.

The shared test server (HOOKINBOX_TEST_POSTGRES_URL) must never be stopped: other tests run
against it at the same time. So a test that takes PostgreSQL down gets a cluster of its own,
made with the local binaries (`initdb`, `pg_ctl`) in a temporary directory, listening on a
free loopback port, with its Unix socket inside that directory.

initdb and postgres refuse to run as root; as root we run them as the `postgres` OS user
(`runuser`) and hand the directory to it. `cleanup` always stops the cluster (immediate
shutdown: nothing in it is worth keeping) and removes the directory, so a failing test does not
leave a postmaster behind.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Literal, Protocol, TypeVar

import sqlalchemy as sa

from tests.support.server import free_port

BIN_ENV = "HOOKINBOX_TEST_POSTGRES_BIN"
DEFAULT_BIN = "/usr/lib/postgresql/15/bin"
OS_USER = "postgres"
REQUIRE_CLUSTER = os.environ.get("HOOKINBOX_REQUIRE_POSTGRES") == "1"
"""As for the shared server: with HOOKINBOX_REQUIRE_POSTGRES=1 a missing cluster fails."""
StopMode = Literal["fast", "immediate"]
"""`fast`: sessions are ended and the server shuts down cleanly, as a planned restart does.
`immediate`: every process quits at once, as in a crash; the next start runs WAL recovery."""

SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "shared_buffers": "16MB",
    "max_connections": "100",
    # fsync stays on: a 2xx promises a durable row, and an immediate stop followed by crash
    # recovery must find every committed one. The cost is small on the few hundred commits a
    # test makes; `--no-sync` below only skips initdb's own flush of the fresh template files.
    "fsync": "on",
    "log_min_messages": "warning",
}


def binaries() -> Path | None:
    """The directory holding initdb and pg_ctl, or None when this machine has none."""
    directory = Path(os.environ.get(BIN_ENV, DEFAULT_BIN))
    if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
        return directory
    return None


def unavailable_reason() -> str | None:
    """Why no cluster can be made here (None: one can)."""
    if binaries() is None:
        return f"no PostgreSQL binaries in {os.environ.get(BIN_ENV, DEFAULT_BIN)} ({BIN_ENV})"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(OS_USER)
        except KeyError:
            return f"running as root, and there is no {OS_USER!r} OS user to run PostgreSQL"
        if shutil.which("runuser") is None:
            return "running as root, and `runuser` is missing"
    return None


class PostgresCluster:
    """One cluster in its own temporary directory; `start`, `stop`, `restart`, `cleanup`."""

    def __init__(self) -> None:
        found = binaries()
        if found is None:
            raise RuntimeError(unavailable_reason())
        self.bin = found
        self.root = Path(tempfile.mkdtemp(prefix="hookinbox-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log = self.root / "postgres.log"
        self.port = free_port()
        self.running = False
        try:
            self.socket_dir.mkdir()
            if os.geteuid() == 0:
                user = pwd.getpwnam(OS_USER)
                for path in (self.root, self.socket_dir):
                    os.chown(path, user.pw_uid, user.pw_gid)
            self._run(
                "initdb", "-D", str(self.data), "--no-sync", "--auth=trust",
                "--username=postgres", "--encoding=UTF8", "--locale=C.UTF-8", "--no-instructions",
            )  # fmt: skip
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def _command(self, program: str, *args: str) -> list[str]:
        command = [str(self.bin / program), *args]
        if os.geteuid() == 0:
            return ["runuser", "-u", OS_USER, "--", *command]
        return command

    def _run(self, program: str, *args: str, timeout: float = 60) -> None:
        result = subprocess.run(
            self._command(program, *args),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,  # runuser keeps the cwd; the postgres user must be able to enter it
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{program} {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout}{result.stderr}\n{self.log_tail()}"
            )

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        """Start and wait until it accepts connections (`pg_ctl -w`)."""
        options = [f"-p {self.port}", f"-k {self.socket_dir}"]
        options += [f"-c {name}={value}" for name, value in SETTINGS.items()]
        self._run(
            "pg_ctl", "start", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
            "-o", " ".join(options),
        )  # fmt: skip
        self.running = True

    def stop(self, mode: StopMode = "fast") -> None:
        """Stop and wait until every server process has exited."""
        self._run("pg_ctl", "stop", "-D", str(self.data), "-m", mode, "-w", "-t", "60")
        self.running = False

    def restart(self, mode: StopMode = "fast") -> None:
        self.stop(mode)
        self.start()

    def create_database(self, name: str) -> str:
        """An empty database in this cluster; returns its URL."""
        engine = sa.create_engine(
            self.url().replace("postgresql://", "postgresql+psycopg://", 1),
            isolation_level="AUTOCOMMIT",
            poolclass=sa.NullPool,
        )
        try:
            with engine.connect() as connection:
                connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
        finally:
            engine.dispose()
        return self.url(name)

    def log_tail(self, characters: int = 3000) -> str:
        return tail(self.log, characters)

    def cleanup(self) -> None:
        """Stop the cluster if it runs (even half-started) and remove its directory."""
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")
        finally:
            self.running = False
            shutil.rmtree(self.root, ignore_errors=True)


def tail(log: Path, characters: int = 3000) -> str:
    """The end of a server's log, for an error message ("" before it was written)."""
    try:
        return log.read_text(errors="replace")[-characters:]
    except FileNotFoundError:
        return ""


class Throwaway(Protocol):
    """A server of a test's own (this cluster, `_mariadb.MariaDBServer`)."""

    def start(self) -> None: ...

    def cleanup(self) -> None: ...


Made = TypeVar("Made", bound=Throwaway)


@contextmanager
def throwaway(make: Callable[[], Made]) -> Iterator[Made]:
    """A server made and started, always stopped and removed on exit (even half-started)."""
    server = make()
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


def throwaway_cluster() -> AbstractContextManager[PostgresCluster]:
    """A started cluster, always stopped and removed on exit."""
    return throwaway(PostgresCluster)
