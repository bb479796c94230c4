"""Redis claim fixtures: a key prefix per test (cleaned up after it), and Redis servers of the
test's own for failures that must not touch the shared one: stopped mid-handler, or a Cluster."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from hookinbox.claims import RedisClaims
from tests.conftest import REQUIRE_REDIS
from tests.support.server import free_port


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    """A key prefix no other test uses; every key under it is deleted afterwards."""
    name = f"hookinbox-test-{uuid.uuid4().hex[:12]}"
    yield name
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{name}:*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def claims(redis_url: str, prefix: str) -> Iterator[RedisClaims]:
    store = RedisClaims.from_url(redis_url, prefix=prefix)
    yield store
    store.close()


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on: "Redis is down"."""
    return free_port()


def _redis_server() -> str:
    path = shutil.which("redis-server")
    if path is None:
        message = "redis-server is not installed (apt-get install redis-server)"
        if REQUIRE_REDIS:
            pytest.fail(message)
        pytest.skip(message)
    return path


@dataclass
class PrivateRedis:
    """A redis-server of one test's own, stopped by the test when it wants Redis gone."""

    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def _cluster_port() -> int:
    """A free port whose cluster bus port (+10000, so at most 65535) is free too."""
    for _ in range(100):
        port = free_port()
        if port <= 55535 and _is_free(port + 10000):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def start_redis(directory: Path, *extra: str, cluster: bool = False) -> PrivateRedis:
    port = _cluster_port() if cluster else free_port()
    if cluster:
        extra = ("--cluster-enabled", "yes", "--cluster-node-timeout", "2000", *extra)
    process = subprocess.Popen(
        [_redis_server(), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
         "--appendonly", "no", "--dir", str(directory), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    server = PrivateRedis(process, port)
    client = redis.Redis(port=port, socket_connect_timeout=1)
    deadline = time.monotonic() + 10
    try:
        while True:
            try:
                client.ping()
                return server
            except redis.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    server.stop()
                    raise RuntimeError(f"redis-server on port {port} did not start") from None
                time.sleep(0.05)
    finally:
        client.close()


@pytest.fixture
def private_redis(redis_url: str, tmp_path: Path) -> Iterator[PrivateRedis]:
    server = start_redis(tmp_path)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def redis_cluster(redis_url: str) -> Iterator[str]:
    """A three-master Redis Cluster on loopback; yields a URL of one of its nodes."""
    directory = Path(tempfile.mkdtemp(prefix="hookinbox-cluster-"))
    nodes: list[PrivateRedis] = []
    try:
        for number in range(3):
            node_dir = directory / str(number)
            node_dir.mkdir()
            nodes.append(start_redis(node_dir, cluster=True))
        addresses = [f"127.0.0.1:{node.port}" for node in nodes]
        subprocess.run(
            ["redis-cli", "--cluster", "create", *addresses, "--cluster-replicas", "0",
             "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        _wait_cluster_ok(nodes)
        yield nodes[0].url
    finally:
        for node in nodes:
            node.stop()
        shutil.rmtree(directory, ignore_errors=True)


def _wait_cluster_ok(nodes: list[PrivateRedis]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        infos = [
            subprocess.run(
                ["redis-cli", "-p", str(node.port), "cluster", "info"],
                capture_output=True, text=True, timeout=10,
            ).stdout
            for node in nodes
        ]  # fmt: skip
        if all("cluster_state:ok" in info for info in infos):
            return
        time.sleep(0.2)
    raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
