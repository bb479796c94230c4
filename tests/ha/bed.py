"""The multi-host test bed: 3 application hosts behind HAProxy, on a highly available PostgreSQL.

    client (10.77.0.50)  --HTTP-->  lb: HAProxy (10.77.0.40:8080)
        --> app1, app2, app3 (10.77.0.31-33:8000): `hookinbox serve` with its worker each
        --> PostgreSQL: pg1, pg2 (10.77.0.21-22), one primary and one synchronous standby,
            managed by pg_auto_failover's monitor (10.77.0.10)

Every host is a network namespace (tests/ha/netns.py). The application hosts find the primary
with a libpq multi-host URL and `target_session_attrs=read-write`; HAProxy health-checks
`/healthz` and retries a request whose connection failed on another host. The bed is built
once per test module (about 15 s) and removed afterwards, processes, namespaces and files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.ha.cluster import Cluster
from tests.ha.netns import Host, Network

ROOT = Path(__file__).resolve().parents[2]
APP_PORT = 8000
LB_PORT = 8080
LEASE_SECONDS = 5.0
"""Short, so that a partitioned host's leases pass within the test; production keeps 60 s."""

HAPROXY = """\
global
    maxconn 2000
    log stdout format raw local0
defaults
    mode http
    log global
    # One line per request, for the test: time, status, and the server's own answer time.
    log-format "request %Ts.%ms %ST %Tw %Tc %Tr %b/%s %{{+Q}}r"
    timeout connect 1s
    timeout client 30s
    timeout http-request 10s
    timeout http-keep-alive 10s
    timeout queue 2s
    timeout server 5s
    retries 2
    option redispatch
    retry-on conn-failure empty-response
frontend webhooks
    bind {lb}:{lb_port}
    option forwardfor
    http-request set-header X-Forwarded-Proto https if {{ ssl_fc }}
    http-request set-header X-Forwarded-Proto http unless {{ ssl_fc }}
    stick-table type ipv6 size 100k expire 30s store http_req_rate(10s)
    http-request track-sc0 src
    acl too_fast sc_http_req_rate(0) gt 2000
    http-request return status 429 hdr Retry-After 10 if too_fast
    http-request deny deny_status 413 if {{ req.hdr_val(content-length) gt 1048576 }}
    default_backend applications
backend applications
    balance roundrobin
    option http-buffer-request
    option httpchk GET /healthz
{servers}
"""


@dataclass(frozen=True)
class BalancedRequest:
    """One request as HAProxy saw it; times in milliseconds, -1 where a step never happened."""

    at: float
    status: int
    queued: int
    connect: int
    response: int
    """From the request sent to the server to its answer's headers: the server's own time."""
    server: str

    @property
    def answered(self) -> float:
        """When the server's answer reached HAProxy (epoch seconds)."""
        return self.at + (max(self.queued, 0) + max(self.connect, 0) + self.response) / 1000


class Bed:
    def __init__(self) -> None:
        self.network = Network()
        self.dir = Path(tempfile.mkdtemp(prefix="hookinbox-ha-"))
        self.logs = self.dir / "logs"
        self.logs.mkdir()
        self.apps: list[Host] = []
        self.cluster: Cluster

    # -- building ------------------------------------------------------------------------

    def start(self) -> None:
        self.network.open()
        net = self.network
        monitor, pg1, pg2 = (
            net.add_host("mon", 10),
            net.add_host("pg1", 21),
            net.add_host("pg2", 22),
        )
        self.apps = [net.add_host(f"app{n}", 30 + n) for n in (1, 2, 3)]
        self.lb = net.add_host("lb", 40)
        self.client = net.add_host("client", 50)
        self.cluster = Cluster(monitor, pg1, pg2, self.dir / "pg")
        self.cluster.start(self.logs, timeout=180)
        for app in self.apps:
            self.start_app(app)
        servers = "\n".join(
            f"    server {app.name} {app.address}:{APP_PORT} check inter 500 fall 2 rise 2"
            for app in self.apps
        )
        config = self.dir / "haproxy.cfg"
        config.write_text(HAPROXY.format(lb=self.lb.address, lb_port=LB_PORT, servers=servers))
        self.lb.spawn(["haproxy", "-db", "-f", str(config)], log=self.logs / "haproxy.log")
        for app in self.apps:
            self.wait_http(f"{self.app_url(app)}/readyz", 200, timeout=90)
        self.wait_http(f"{self.target}".replace("/webhooks/stripe", "/healthz"), 200, timeout=30)

    def start_app(self, app: Host) -> None:
        app.spawn(
            [sys.executable, "-m", "hookinbox", "serve", "tests.ha.app:inbox",
             "--host", app.address, "--port", str(APP_PORT),
             "--lease-seconds", str(LEASE_SECONDS), "--grace-period", "1",
             "--log-level", os.environ.get("HOOKINBOX_HA_LOG_LEVEL", "warning")],
            log=self.logs / f"{app.name}.log",
            env={"HOOKINBOX_DATABASE_URL": self.cluster.url(), "HA_HOST": app.name,
                 "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
        )  # fmt: skip

    def close(self) -> None:
        self.network.close()
        keep = os.environ.get("HOOKINBOX_HA_LOGS")
        if keep:  # for a look after a failure (CI prints them)
            shutil.copytree(self.logs, keep, dirs_exist_ok=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- using ---------------------------------------------------------------------------

    @property
    def target(self) -> str:
        return f"http://{self.lb.address}:{LB_PORT}/webhooks/stripe"

    def app_url(self, app: Host) -> str:
        return f"http://{app.address}:{APP_PORT}"

    def http_status(self, url: str) -> int:
        done = self.client.call(
            ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2", url],
            check=False,
            timeout=10,
        )
        return int(done.stdout or 0)

    def wait_http(self, url: str, status: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.http_status(url) != status:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer {status} within {timeout:.0f} s")
            time.sleep(0.3)

    def python(self, *args: str) -> list[str]:
        return [sys.executable, *args]

    def start_load(self, run: str, rate: float) -> tuple[subprocess.Popen[bytes], Path, Path]:
        out = self.logs / f"load-{run}.jsonl"
        stop = self.dir / f"stop-{run}"
        ready = [arg for app in self.apps for arg in ("--ready", f"{self.app_url(app)}/readyz")]
        process = self.client.spawn(
            self.python("-m", "tests.ha.load", "--target", self.target, "--rate", str(rate),
                        "--run", run, "--out", str(out), "--stop-file", str(stop), *ready),
            log=self.logs / f"load-{run}.log",
            env={"PYTHONPATH": str(ROOT)},
            cwd=ROOT,
        )  # fmt: skip
        return process, out, stop

    def balancer_requests(self, since: float) -> list[BalancedRequest]:
        """The requests HAProxy logged since `since` (epoch seconds), webhooks only."""
        found = []
        for line in (self.logs / "haproxy.log").read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) < 7 or parts[0] != "request" or "/webhooks/" not in line:
                continue
            at = float(parts[1])
            if at >= since:
                status, queued, connect, response = (int(p) for p in parts[2:6])
                found.append(BalancedRequest(at, status, queued, connect, response, parts[6]))
        return found

    def verify(self, run: str, acked: Path, timeout: float = 90) -> str:
        done = self.client.call(
            self.python("-m", "tests.ha.verify", self.cluster.url(), str(acked), "--run", run,
                        "--drain-timeout", str(timeout)),
            env={"PYTHONPATH": str(ROOT)},
            timeout=timeout + 30,
        )  # fmt: skip
        return done.stdout
