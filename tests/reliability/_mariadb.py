"""A throwaway MariaDB server for tests that stop, crash or reconfigure the database.

The shared test server (HOOKINBOX_TEST_MYSQL_URL) must never be stopped or set read-only:
other tests run against it at the same time. So a test that does either gets a server of its
own, as `_cluster.py` gives PostgreSQL's tests: a data directory made by `mariadb-install-db`
in a temporary directory, and `mariadbd` started on it with no option file read
(`--no-defaults`: nothing of the machine's configuration, the shared server's included),
listening on a free loopback port, its Unix socket and pid file inside that directory.

`stop("clean")` is SIGTERM, MariaDB's normal shutdown (sessions ended, InnoDB's buffers
flushed); `stop("kill")` is SIGKILL, a crash, after which the next start runs InnoDB's crash
recovery from its redo log. `innodb_flush_log_at_trx_commit` keeps its default, 1: each commit
is on disk before hookinbox answers 2xx. `cleanup` always kills the server and removes the
directory, so a failing test leaves no mariadbd behind.

mariadbd refuses to run as root unless told `--user=root`; it is told so here when the test
runs as root (the server only ever reads and writes its own temporary directory).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Literal

import sqlalchemy as sa

from tests.reliability._cluster import tail, throwaway
from tests.support.server import free_port

REQUIRE_SERVER = os.environ.get("HOOKINBOX_REQUIRE_MYSQL") == "1"
"""As for the shared server: with HOOKINBOX_REQUIRE_MYSQL=1 a missing mariadbd fails."""
INSTALL_DB = "mariadb-install-db"
SERVER = "mariadbd"
StopMode = Literal["clean", "kill"]
"""`clean`: SIGTERM, sessions ended and InnoDB shut down, as a planned restart does.
`kill`: SIGKILL, as in a crash; the next start recovers from InnoDB's redo log."""

SETTINGS = (
    "--bind-address=127.0.0.1",
    "--skip-name-resolve",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_unicode_ci",
    "--innodb-buffer-pool-size=32M",
    "--innodb-log-file-size=16M",
    "--max-connections=300",
    "--log-warnings=1",
)
"""Small buffers for a test's few thousand rows; the log file small so that install is quick."""
START_TIMEOUT = 60.0


def binary(name: str) -> str | None:
    """The program's path: on PATH, or in /usr/sbin (where Debian puts mariadbd)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")


def unavailable_reason() -> str | None:
    """Why no server can be made here (None: one can)."""
    for name in (INSTALL_DB, SERVER):
        if binary(name) is None:
            return f"no {name} on this machine (Debian's mariadb-server package)"
    return None


class MariaDBServer:
    """One server in its own temporary directory; `start`, `stop`, `execute`, `cleanup`."""

    def __init__(self, options: tuple[str, ...] = ()) -> None:
        """`options`: more of mariadbd's command-line settings (`--max-allowed-packet=4M`)."""
        install, server = binary(INSTALL_DB), binary(SERVER)
        self.options = options
        if install is None or server is None:
            raise RuntimeError(unavailable_reason())
        self.server = server
        # A short path: a Unix socket's path is limited to 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="hookinbox-mdb-"))
        self.data = self.root / "data"
        self.socket = self.root / "mysqld.sock"
        self.log = self.root / "error.log"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.as_root = ("--user=root",) if os.geteuid() == 0 else ()
        try:
            result = subprocess.run(
                [
                    install, "--no-defaults", f"--datadir={self.data}", "--skip-test-db",
                    "--auth-root-authentication-method=normal", "--skip-name-resolve",
                    "--innodb-log-file-size=16M", *self.as_root,
                ],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            if result.returncode != 0:
                raise RuntimeError(f"{INSTALL_DB} failed:\n{result.stdout}{result.stderr}")
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def url(self, database: str = "mysql", user: str = "root", password: str = "") -> str:
        secret = f":{password}" if password else ""
        return f"mysql://{user}{secret}@127.0.0.1:{self.port}/{database}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start and wait until it accepts connections (root answers `SELECT 1`)."""
        assert not self.running, "the server runs already"
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    self.server, "--no-defaults", f"--datadir={self.data}",
                    f"--socket={self.socket}", f"--port={self.port}",
                    f"--pid-file={self.root / 'mysqld.pid'}", f"--log-error={self.log}",
                    *SETTINGS, *self.options, *self.as_root,
                ],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
            )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT
        while not self._answers():
            if not self.running:
                raise RuntimeError(f"mariadbd exited at start:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"mariadbd did not answer within {START_TIMEOUT:g} s")
            time.sleep(0.05)

    def _answers(self) -> bool:
        try:
            self.execute("SELECT 1")
        except sa.exc.OperationalError:
            return False
        return True

    def stop(self, mode: StopMode = "clean") -> None:
        """Stop and wait until the server process has exited."""
        assert self.process is not None and self.running, "the server is not running"
        self.process.send_signal(signal.SIGTERM if mode == "clean" else signal.SIGKILL)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise RuntimeError(f"mariadbd did not stop within 60 s:\n{self.log_tail()}") from None

    def execute(self, *statements: str, user: str = "root", password: str = "") -> None:
        """Run statements on a connection of their own (autocommit)."""
        url = sa.make_url(self.url(user=user, password=password)).set(drivername="mysql+pymysql")
        engine = sa.create_engine(
            url,
            poolclass=sa.NullPool,
            isolation_level="AUTOCOMMIT",
            connect_args={"connect_timeout": 2},
        )
        try:
            with engine.connect() as connection:
                for statement in statements:
                    connection.exec_driver_sql(statement)
        finally:
            engine.dispose()

    def create_database(self, name: str) -> str:
        """An empty utf8mb4 database on this server; returns root's URL of it."""
        self.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        return self.url(name)

    def log_tail(self, characters: int = 3000) -> str:
        return tail(self.log, characters)

    def cleanup(self) -> None:
        """Kill the server if it runs and remove its directory."""
        try:
            if self.process is not None and self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=60)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def throwaway_server(*options: str) -> AbstractContextManager[MariaDBServer]:
    """A started server (with mariadbd's `options`), always killed and removed on exit."""
    return throwaway(lambda: MariaDBServer(options))
