"""A highly available PostgreSQL in three hosts: pg_auto_failover's monitor, a primary and a
synchronous standby (Debian's `pg-auto-failover-cli` and `postgresql-15-auto-failover`).

What ../shared/SCALEOUT-NOTES.md taught, applied here:
- each node gets its own Unix socket directory (`PG_REGRESS_SOCK_DIR`): namespaces do not
  isolate sockets, and the machine's own PostgreSQL (the test suite's) lives in the default one;
- a standby being created waits for a spread checkpoint (about 100 s): a CHECKPOINT on the
  primary meanwhile ends the wait;
- pg_rewind connects to the `postgres` database, which the generated HBA does not allow: the
  subnet is trusted for every database, so a rejoin rewinds instead of copying everything;
- the monitor's failover timeouts (20 s unhealthy + 30 s demote by default) are lowered, so
  an unplanned failover takes seconds.
Synchronous replication (pg_auto_failover's default with one standby, `synchronous_commit` on)
is what makes "acknowledged" mean "on two hosts": the promoted standby has every commit the
old primary answered.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from tests.ha.netns import SUBNET, Host

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PORT = 5432
DATABASE = "hookinbox"
MONITOR_SETTINGS = {
    # Milliseconds. Defaults: 5000, 5000, 20000, 30000, 10000.
    "pgautofailover.health_check_period": 1000,
    "pgautofailover.health_check_timeout": 1000,
    "pgautofailover.node_considered_unhealthy_timeout": 3000,
    "pgautofailover.primary_demote_timeout": 3000,
    "pgautofailover.startup_grace_period": 3000,
}


def installed() -> str | None:
    """Why the cluster cannot be made here, or None."""
    for tool in ("pg_autoctl",):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install pg-auto-failover-cli)"
    if not (PG_BIN / "pg_ctl").exists():
        return f"PostgreSQL 15's binaries are not in {PG_BIN}"
    return None


@dataclass
class Node:
    host: Host
    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def sockets(self) -> Path:
        return self.root / "sockets"

    def env(self) -> dict[str, str]:
        return {
            "PATH": f"{PG_BIN}:/usr/bin:/bin",
            "PG_REGRESS_SOCK_DIR": str(self.sockets),
            "PGHOST": str(self.sockets),
            "PGDATA": str(self.data),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "HOME": str(self.root),
        }

    def autoctl(self, *args: str, timeout: float = 60) -> str:
        return self.host.call(
            ["pg_autoctl", *args, "--pgdata", str(self.data)],
            user="postgres",
            env=self.env(),
            timeout=timeout,
        ).stdout

    def psql(self, sql: str, database: str = "postgres", timeout: float = 30) -> str:
        return self.host.call(
            ["psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-p", str(PORT), "-d", database,
             "-c", sql],
            user="postgres",
            env=self.env(),
            timeout=timeout,
        ).stdout.strip()  # fmt: skip

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])


class Cluster:
    """`start()` brings up the monitor, then the primary, then the standby."""

    def __init__(self, monitor: Host, first: Host, second: Host, root: Path) -> None:
        self.root = root
        self.monitor = Node(monitor, root / monitor.name)
        self.nodes = [Node(first, root / first.name), Node(second, root / second.name)]

    @property
    def monitor_uri(self) -> str:
        return f"postgres://autoctl_node@{self.monitor.host.address}:{PORT}/pg_auto_failover?sslmode=disable"

    def url(self, *, driver: str = "postgresql") -> str:
        hosts = ",".join(node.host.address for node in self.nodes)
        return (
            f"{driver}://postgres@/{DATABASE}?host={hosts}&port={PORT},{PORT}"
            "&target_session_attrs=read-write"
        )

    def _prepare(self, node: Node) -> None:
        node.sockets.mkdir(parents=True, exist_ok=True)
        shutil.chown(node.root, "postgres", "postgres")
        shutil.chown(node.sockets, "postgres", "postgres")

    def start(self, log_dir: Path, timeout: float = 120) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for directory in (self.root, *self.root.parents):
            if directory == Path("/tmp") or directory == Path("/"):
                break
            os.chmod(directory, 0o755)  # postgres must reach its directories
        shutil.chown(self.root, "postgres", "postgres")
        self._prepare(self.monitor)
        self.monitor.host.spawn(
            ["pg_autoctl", "create", "monitor", "--pgdata", str(self.monitor.data),
             "--pgport", str(PORT), "--hostname", self.monitor.host.address,
             "--auth", "trust", "--no-ssl", "--run"],
            log=log_dir / "monitor.log", env=self.monitor.env(), user="postgres",
        )  # fmt: skip
        self._wait(lambda: self._monitor_ready(), timeout, "the monitor")
        settings = "; ".join(f"ALTER SYSTEM SET {k} = {v}" for k, v in MONITOR_SETTINGS.items())
        for statement in [*settings.split("; "), "SELECT pg_reload_conf()"]:
            self.monitor.psql(statement, database="pg_auto_failover")
        for index, node in enumerate(self.nodes):
            self._prepare(node)
            node.host.spawn(
                ["pg_autoctl", "create", "postgres", "--pgdata", str(node.data),
                 "--pgport", str(PORT), "--hostname", node.host.address,
                 "--name", node.host.name, "--dbname", DATABASE,
                 "--monitor", self.monitor_uri, "--auth", "trust", "--no-ssl",
                 "--pg-hba-lan", "--run"],
                log=log_dir / f"{node.host.name}.log", env=node.env(), user="postgres",
            )  # fmt: skip
            if index == 0:
                self._wait(partial(self._in_state, node, "single"), timeout, "the primary")
                self._trust_subnet(node)
        self._wait(self._standby_ready, timeout, "the standby")
        self._trust_subnet(self.nodes[1])

    def _in_state(self, node: Node, state: str) -> bool:
        return self.states().get(node.host.name) == state

    def _monitor_ready(self) -> bool:
        try:
            return self.monitor.psql("SELECT 1", database="pg_auto_failover", timeout=5) == "1"
        except Exception:
            return False

    def _standby_ready(self) -> bool:
        states = self.states()
        if sorted(states.values()) == ["primary", "secondary"]:
            return True
        # The standby's base backup waits for a spread checkpoint: ask for it now.
        primary = self.primary()
        if primary is not None:
            try:
                primary.psql("CHECKPOINT", timeout=10)
            except Exception:
                pass
        return False

    def _trust_subnet(self, node: Node) -> None:
        """pg_rewind connects to the `postgres` database: trust the subnet for all of them."""
        hba = node.data / "pg_hba.conf"
        line = f"host all all {SUBNET}.0/24 trust\n"
        if line not in hba.read_text():
            with hba.open("a") as handle:
                handle.write(line)
            node.psql("SELECT pg_reload_conf()")

    def states(self) -> dict[str, str]:
        """Each data node's state as the monitor last heard it: name -> reported state."""
        try:
            out = self.monitor.psql(
                "SELECT json_object_agg(nodename, reportedstate) FROM pgautofailover.node",
                database="pg_auto_failover",
                timeout=5,
            )
        except Exception:
            return {}
        return json.loads(out) if out else {}

    def goals(self) -> dict[str, str]:
        out = self.monitor.psql(
            "SELECT json_object_agg(nodename, goalstate) FROM pgautofailover.node",
            database="pg_auto_failover",
            timeout=5,
        )
        return json.loads(out) if out else {}

    def primary(self) -> Node | None:
        states = self.states()
        for node in self.nodes:
            if states.get(node.host.name) in ("single", "primary", "wait_primary"):
                return node
        return None

    def healthy(self) -> bool:
        return sorted(self.states().values()) == ["primary", "secondary"]

    def wait_promoted(self, node: Node, timeout: float) -> None:
        """Until the monitor has made `node` the primary (its standby lost, or not yet back)."""
        self._wait(
            lambda: self.states().get(node.host.name) in ("primary", "wait_primary", "single"),
            timeout,
            f"{node.host.name} promoted",
        )

    def switchover(self) -> None:
        self.monitor.autoctl("perform", "switchover", timeout=120)

    def wait_healthy(self, timeout: float) -> None:
        self._wait(self._standby_ready, timeout, "primary + secondary")

    @staticmethod
    def _wait(ready: object, timeout: float, what: str) -> None:
        assert callable(ready)
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not ready within {timeout:.0f} s")
            time.sleep(0.5)
