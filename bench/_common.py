"""What every benchmark shares: servers on loopback, signed requests, the load generators, stats.

Load comes from outside the code under test: wrk (C, Debian package `wrk`) for saturation, and
`_loadgen.py` in a separate process for a fixed, moderate, open-loop rate. Requests are signed
in advance (Stripe-style, ~700 bytes, a distinct event id each) so that the generator does no
cryptography while it measures.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
SECRET = "whsec_bench_secret"
POSTGRES_ADMIN_URL = os.environ.get(
    "HOOKINBOX_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
MYSQL_ADMIN_URL = os.environ.get("HOOKINBOX_BENCH_MYSQL_URL", "mysql://root@127.0.0.1:3306/mysql")
"""A MariaDB server where the benchmarks may create and drop databases (`hookinbox_bench_*`)."""


# -- requests --------------------------------------------------------------------------------


def stripe_body(event_id: str, payment: str) -> bytes:
    """A ~700-byte checkout.session.completed event, like Stripe's."""
    event = {
        "id": event_id,
        "object": "event",
        "api_version": "2024-06-20",
        "created": int(time.time()),
        "type": "checkout.session.completed",
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": None, "idempotency_key": None},
        "data": {
            "object": {
                "id": f"cs_test_{payment}",
                "object": "checkout.session",
                "amount_subtotal": 4200,
                "amount_total": 4200,
                "currency": "eur",
                "customer": f"cus_{payment[:14]}",
                "customer_email": "buyer@example.com",
                "payment_intent": payment,
                "payment_status": "paid",
                "status": "complete",
                "mode": "payment",
                "success_url": "https://shop.example.com/thanks",
                "metadata": {"order_ref": payment[-10:], "channel": "web"},
            }
        },
    }
    return json.dumps(event, separators=(",", ":")).encode()


def sign(body: bytes, timestamp: int | None = None) -> str:
    t = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={digest}"


def request_file(count: int, copies: int = 1) -> Path:
    """`count` distinct signed events, each line `signature<TAB>body`, each repeated `copies`
    times in a row (for the "delivered 3 times" runs). Signed now: use within 5 minutes."""
    run = uuid.uuid4().hex[:8]
    path = Path(tempfile.mkstemp(prefix="bench-requests-", suffix=".tsv")[1])
    with path.open("wb") as out:
        for n in range(count):
            payment = f"pi_{run}{n:09d}"
            body = stripe_body(f"evt_{run}{n:09d}", payment)
            line = sign(body).encode() + b"\t" + body + b"\n"
            out.write(line * copies)
    return path


# -- servers ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base_url: str
    log: Path

    @property
    def pids(self) -> list[int]:
        """The server process and its children (uvicorn workers, hookinbox's worker)."""
        found = [self.process.pid]
        for task in Path(f"/proc/{self.process.pid}/task").glob("*"):
            try:
                found += [int(c) for c in (task / "children").read_text().split()]
            except FileNotFoundError:
                continue
        return found


@contextmanager
def server(command: Sequence[str], env: dict[str, str] | None = None,
           ready_path: str = "/healthz") -> Iterator[Server]:  # fmt: skip
    """Start `command` (it must take the port from $BENCH_PORT or be given it), wait until
    `ready_path` answers, stop it on exit."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="bench-server-", suffix=".log")[1])
    full_env = {**os.environ, "BENCH_PORT": str(port), **(env or {})}
    args = [part.replace("{port}", str(port)) for part in command]
    with log.open("wb") as out:
        process = subprocess.Popen(
            args, cwd=ROOT, env=full_env, stdout=out, stderr=subprocess.STDOUT
        )
    base_url = f"http://127.0.0.1:{port}"
    running = Server(process, base_url, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{args[:4]} exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(base_url + ready_path, timeout=1).status_code < 500:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{args[:4]} did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def hookinbox_serve(
    app: str, database_url: str, workers: int = 1, worker: bool = False
) -> list[str]:
    command = [sys.executable, "-m", "hookinbox", "serve", app, "--database-url", database_url,
               "--port", "{port}", "--workers", str(workers), "--log-level", "warning"]  # fmt: skip
    if not worker:
        command.append("--no-worker")
    return command


def uvicorn_app(app: str, workers: int = 1) -> list[str]:
    return [sys.executable, "-m", "uvicorn", app, "--port", "{port}", "--workers", str(workers),
            "--log-level", "warning", "--no-access-log"]  # fmt: skip


# -- databases -------------------------------------------------------------------------------


def sa_url(url: str) -> str:
    """A hookinbox database URL as SQLAlchemy wants it, on the driver hookinbox uses: psycopg 3
    for `postgresql://`, PyMySQL (utf8mb4) for `mysql://`."""
    if url.startswith("mysql://"):
        url = url.replace("mysql://", "mysql+pymysql://", 1)
        return url if "charset=" in url else url + ("&" if "?" in url else "?") + "charset=utf8mb4"
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


@contextmanager
def database(backend: str) -> Iterator[str]:
    """A fresh, empty database URL on `backend` ("sqlite", "postgres" or "mysql"), dropped
    afterwards. MariaDB: a `hookinbox_bench_<random>` database (utf8mb4) on the server of
    HOOKINBOX_BENCH_MYSQL_URL."""
    if backend == "sqlite":
        directory = Path(tempfile.mkdtemp(prefix="bench-db-"))
        try:
            yield f"sqlite:///{directory / 'bench.db'}"
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        return
    if backend == "mysql":
        yield from _mysql_database()
        return
    import sqlalchemy as sa

    name = f"bench_{uuid.uuid4().hex[:10]}"
    admin_url = POSTGRES_ADMIN_URL.replace("postgresql://", "postgresql+psycopg://", 1)
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _mysql_database() -> Iterator[str]:
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    name = f"hookinbox_bench_{uuid.uuid4().hex[:10]}"
    server_url = make_url(MYSQL_ADMIN_URL)
    admin = sa.create_engine(server_url.set(drivername="mysql+pymysql"), poolclass=sa.NullPool)
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    try:
        yield server_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()


# -- load ------------------------------------------------------------------------------------

WRK_SCRIPT = BENCH / "wrk_requests.lua"


@dataclass
class Load:
    """One measured run."""

    requests: int
    seconds: float
    rate: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    errors: int
    """Non-2xx answers and socket errors."""


def wrk(url: str, requests: Path, *, seconds: int = 10, connections: int = 64,
        threads: int = 2) -> Load:  # fmt: skip
    """Saturation: wrk with `connections` keep-alive connections for `seconds`."""
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk (Debian) or brew install wrk")
    result = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s", "--latency",
         "-s", str(WRK_SCRIPT), url, "--", str(requests), str(threads)],
        capture_output=True, text=True, timeout=seconds + 60, check=True,
    )  # fmt: skip
    return parse_wrk(result.stdout)


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if not match:
        raise ValueError(f"not a wrk duration: {text!r}")
    return float(match[1]) * _UNITS[match[2]]


def parse_wrk(output: str) -> Load:
    requests = int(re.search(r"(\d+) requests in ([\d.]+)(\w+)", output)[1])  # type: ignore[index]
    seconds = _ms(re.search(r"requests in ([\d.]+\w+)", output)[1]) / 1000  # type: ignore[index]
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)", output, re.MULTILINE)[1])  # type: ignore[index]
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", output, re.MULTILINE)[1])  # type: ignore[index]
    latency_line = re.search(r"Latency\s+(\S+)\s+(\S+)\s+(\S+)", output)
    maximum = _ms(latency_line[3]) if latency_line else float("nan")
    errors = 0
    if match := re.search(r"Non-2xx or 3xx responses: (\d+)", output):
        errors += int(match[1])
    if match := re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    ):
        errors += sum(int(g) for g in match.groups())
    return Load(requests, seconds, requests / seconds, p50, p99, maximum, errors)


def fixed_rate(url: str, requests: Path, *, rate: float, seconds: float,
               concurrency: int = 64, copies: int = 1) -> Load:  # fmt: skip
    """Open-loop load at `rate` events/s from a separate process (`_loadgen.py`); with
    `copies` > 1 each event is sent that many times at once (a provider's duplicate burst)."""
    result = subprocess.run(
        [sys.executable, str(BENCH / "_loadgen.py"), url, str(requests), str(rate),
         str(seconds), str(concurrency), str(copies)],
        capture_output=True, text=True, timeout=seconds + 120, check=True,
    )  # fmt: skip
    return Load(**json.loads(result.stdout))


# -- statistics and results ------------------------------------------------------------------


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median with min and max: the figure to report from at least three runs."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def machine() -> str:
    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return f"{os.cpu_count()} cores ({cpu}), Python {sys.version.split()[0]}"


def save(name: str, document: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S")
    path = RESULTS / f"{name}-{stamp}.json"
    document = {"benchmark": name, "date": stamp, "machine": machine(), **document}
    path.write_text(json.dumps(document, indent=2, default=lambda o: asdict(o)))
    return path
