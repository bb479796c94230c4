"""The three units of deploy/systemd/ started by a real systemd, sandbox and all.

systemd boots in a container (tests/deploy/container.py) sharing this machine's network; the
units are the shipped files with only what must differ here changed (the program's path,
ports, the environment file's application and databases; a drop-in for the working directory
and, where this Python lives under /root, its directory made visible). Each does its job:
`serve` on SQLite in its state directory answers signed deliveries and its worker processes
them (woken over its UNIX datagram socket), `worker` processes events stored in PostgreSQL,
`relay` delivers outbox messages stored in MariaDB, and each one's outbox message reaches a
loopback HTTPS server the relay must trust. Then, inside the container: each unit's process
has no capability, no way to gain one, a seccomp filter, and `systemd-analyze security` rates
the running unit OK or better; the SQLite file is its user's alone; SIGTERM stops each with
success; and a probe under the same sandbox shows what it refuses.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hookinbox import WorkerOptions
from tests.apps import shipping
from tests.conftest import _mysql_database, _postgres_database
from tests.deploy.container import booted, missing
from tests.docs.test_runbook import MOST_EXPOSURE, UNITS
from tests.processing.conftest import checkout
from tests.support.loopback import Loopback, Request, serving
from tests.support.pki import make_pki
from tests.support.server import ROOT, free_port
from tests.support.signing import stripe_delivery
from tests.support.workers import wait_for

HOOKINBOX = Path(sys.executable).with_name("hookinbox")
NAMES = ("serve", "worker", "relay")
EVENTS = 3
"""Per unit: deliveries to serve, events stored for the worker, messages for the relay."""
BOOT_TIMEOUT = 120.0


def _free_uid() -> int:
    taken = {int(line.split(":")[2]) for line in Path("/etc/passwd").read_text().splitlines()}
    return next(uid for uid in range(61100, 62000) if uid not in taken)


def _shipped_units() -> list[Path]:
    return [next(u for u in UNITS if u.name == f"hookinbox-{name}.service") for name in NAMES]


def _hidden_by_protect_home(path: Path) -> bool:
    return path.resolve().is_relative_to("/root") or path.resolve().is_relative_to("/home")


def _unit(unit: Path, ports: dict[str, int]) -> str:
    """The shipped unit with this machine's program, and free ports on loopback."""
    text = unit.read_text().replace("/srv/shop/.venv/bin/hookinbox", str(HOOKINBOX))
    text = re.sub(r"--host \S+", "--host 127.0.0.1", text)
    text = re.sub(r"--port \d+", f"--port {ports['http']}", text)
    return re.sub(r"--metrics-port \d+", f"--metrics-port {ports['metrics']}", text)


def _drop_in(name: str) -> str:
    lines = [
        "[Service]",
        f"WorkingDirectory={ROOT}",
        "EnvironmentFile=",  # the shipped file, with this test's application and databases
        f"EnvironmentFile=/etc/hookinbox/{name}.env",
    ]
    hidden = [p for p in (ROOT, Path(sys.prefix), Path(sys.base_prefix)) if
              _hidden_by_protect_home(p)]  # fmt: skip
    if hidden:  # this Python (pyenv's, under /root): visible, and the rest of /root still not
        lines += ["ProtectHome=tmpfs", *(f"BindReadOnlyPaths={p.resolve()}" for p in hidden)]
    return "\n".join(lines) + "\n"


def _environment(database_url: str, target: str) -> str:
    shipped = (ROOT / "deploy" / "systemd" / "hookinbox.env").read_text()
    text = re.sub(r"^HOOKINBOX_APP=.*$", "HOOKINBOX_APP=tests.apps.shipping:inbox", shipped,
                  flags=re.MULTILINE)  # fmt: skip
    text = re.sub(r"^HOOKINBOX_DATABASE_URL=.*$", f"HOOKINBOX_DATABASE_URL={database_url}", text,
                  flags=re.MULTILINE)  # fmt: skip
    # The relay trusts the loopback HTTPS server through this test's own root certificate.
    return text + f"OUTBOX_TARGET={target}\nSSL_CERT_FILE=/etc/hookinbox/test-root.pem\n"


PROBE_UNIT_DROPPED = ("ExecStart=", "Restart=", "RestartSec=", "Type=", "KillSignal=")

REPORT = """\
#!/bin/sh
# Waits for the test's go, reports each unit as it runs, stops them, reports again, powers off.
while [ ! -e /check/go ]; do sleep 0.2; done
for unit in hookinbox-serve hookinbox-worker hookinbox-relay; do
    pid=$(systemctl show -P MainPID $unit.service)
    {
        systemctl show -p ActiveState -p NRestarts $unit.service
        grep -E '^(Uid|NoNewPrivs|Seccomp|CapEff|CapBnd):' /proc/$pid/status
        systemd-analyze security --no-pager $unit.service | tail -n 1
    } > /check/$unit.running 2>&1
done
stat -c '%n %a %U' /var/lib/hookinbox /var/lib/hookinbox/* > /check/state-files 2>&1
systemctl stop hookinbox-serve.service hookinbox-worker.service hookinbox-relay.service
for unit in hookinbox-serve hookinbox-worker hookinbox-relay; do
    systemctl show -p Result -p ExecMainCode -p ExecMainStatus $unit.service > /check/$unit.stopped
    journalctl --no-pager -o cat -u $unit.service > /check/$unit.log 2>&1
done
journalctl --no-pager -o cat -u hookinbox-probe.service > /check/hookinbox-probe.log 2>&1
systemctl poweroff
"""


def _probe_unit(serve_unit: str) -> str:
    """The serve unit's sandbox around tests/deploy/probe.py, run once."""
    kept = [line for line in serve_unit.splitlines() if not line.startswith(PROBE_UNIT_DROPPED)]
    service = kept.index("[Service]") + 1
    kept[service:service] = [
        "Type=oneshot",
        f"ExecStart={sys.executable} {ROOT / 'tests' / 'deploy' / 'probe.py'}",
        "StandardOutput=truncate:/check/probe.json",
    ]
    return "\n".join(kept) + "\n"


def _layout(directory: Path, urls: dict[str, str], target: str, bundle: Path) -> dict[str, int]:
    """The container's units/ (its /etc/systemd/system) and etc/ (over its /etc: passwd,
    group, hookinbox/); the ports."""
    units, etc = directory / "units", directory / "etc"
    config = etc / "hookinbox"
    units.mkdir()
    config.mkdir(mode=0o755, parents=True)
    ports = {}
    for name, unit in zip(NAMES, _shipped_units(), strict=True):
        ports[name], ports[f"{name} metrics"] = free_port(), free_port()
        text = _unit(unit, {"http": ports[name], "metrics": ports[f"{name} metrics"]})
        (units / unit.name).write_text(text)
        (units / f"{unit.name}.d").mkdir()
        (units / f"{unit.name}.d" / "test.conf").write_text(_drop_in(name))
        environment = config / f"{name}.env"
        environment.write_text(_environment(urls[name], target))
        environment.chmod(0o600)  # as docs/deployment.md says: root's alone
        if name == "serve":
            (units / "hookinbox-probe.service").write_text(_probe_unit(text))
            (units / "hookinbox-probe.service.d").mkdir()
            (units / "hookinbox-probe.service.d" / "test.conf").write_text(_drop_in(name))
    shutil.copy(config / "serve.env", config / "hookinbox.env")  # what the probe tries to read
    (config / "hookinbox.env").chmod(0o600)
    shutil.copy(bundle, config / "test-root.pem")
    (config / "test-root.pem").chmod(0o644)
    (units / "report.sh").write_text(REPORT)
    (units / "hookinbox-report.service").write_text(
        "[Unit]\nAfter=hookinbox-serve.service hookinbox-worker.service"
        " hookinbox-relay.service hookinbox-probe.service\n"
        "[Service]\nType=oneshot\nExecStart=/bin/sh /etc/systemd/system/report.sh\n"
    )
    (units / "hookinbox-check.target").write_text(
        "[Unit]\nDescription=hookinbox's units, checked\n"
        "Wants=hookinbox-serve.service hookinbox-worker.service hookinbox-relay.service"
        " hookinbox-probe.service hookinbox-report.service\n"
    )
    uid = _free_uid()
    passwd, group = etc / "passwd", etc / "group"
    passwd.write_text(
        Path("/etc/passwd").read_text() + f"hookinbox:x:{uid}:{uid}::/nonexistent:/bin/false\n"
    )
    group.write_text(Path("/etc/group").read_text() + f"hookinbox:x:{uid}:\n")
    return ports


def _stored_for_the_worker(database_url: str, target: str) -> None:
    """Deliveries received into PostgreSQL and left for the worker unit to process."""
    inbox = shipping.build(database_url, target)
    for number in range(EVENTS):
        headers, body = stripe_delivery(checkout(f"w{number}", f"pi_worker_{number}"),
                                        shipping.STRIPE_SECRET)  # fmt: skip
        assert inbox.receive("stripe", headers, body).status_code == 200
    inbox.close()


def _queued_for_the_relay(database_url: str, target: str) -> None:
    """Events processed here with the relay off: outbox messages in MariaDB for the relay unit."""
    inbox = shipping.build(database_url, target)
    for number in range(EVENTS):
        headers, body = stripe_delivery(checkout(f"r{number}", f"pi_relay_{number}"),
                                        shipping.STRIPE_SECRET)  # fmt: skip
        assert inbox.receive("stripe", headers, body).status_code == 200
    worker = inbox.worker(WorkerOptions(handle_signals=False), prune=False, relay=False)
    worker.run_until_idle(timeout=60)
    inbox.close()


def _report(check: Path, name: str) -> dict[str, str]:
    found = {}
    for line in (check / name).read_text().splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
        elif ":" in line:
            key, value = line.split(":", 1)
        else:
            continue
        found[key.strip()] = value.strip()
    return found


@pytest.fixture
def databases(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    template = request.getfixturevalue("postgres_template")  # skipped, or failed in CI,
    request.getfixturevalue("mysql_server")  # without the servers
    for postgres in _postgres_database(template):
        for mariadb in _mysql_database(migrated=True):
            yield {"worker": postgres, "relay": mariadb}


@pytest.fixture
def shipments(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Loopback, Path]]:
    """A loopback HTTPS server playing the shipping API, and the root certificate to trust."""
    pki = make_pki(tmp_path_factory.mktemp("pki"))

    def respond(_request: Request) -> tuple[int, dict[str, str], bytes]:
        return 200, {}, b""

    with serving(respond, tls=pki.server_tls) as loopback:
        yield loopback, pki.bundle


def _orders(loopback: Loopback) -> set[str]:
    return {json.loads(r.body)["order"] for r in list(loopback.requests) if r.method == "POST"}


@pytest.mark.skipif(missing() is not None, reason=str(missing()))
def test_the_units_run_in_systemd_with_their_sandbox(
    tmp_path: Path, databases: dict[str, str], shipments: tuple[Loopback, Path]
) -> None:
    server, bundle = shipments
    target = f"{server.url}/shipments"
    urls = {"serve": "sqlite:////var/lib/hookinbox/hookinbox.db", **databases}
    _stored_for_the_worker(urls["worker"], target)
    _queued_for_the_relay(urls["relay"], target)
    check = tmp_path / "check"
    check.mkdir()
    ports = _layout(tmp_path, urls, target, bundle)
    serve = f"http://127.0.0.1:{ports['serve']}"
    read_only = sorted({ROOT, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()})
    # The units' PrivateTmp=true gives each service a /tmp of its own, which hides a checkout
    # or a Python under /tmp: every unit would fail to start, seen only as a /readyz timeout.
    hidden = [str(path) for path in read_only if path.is_relative_to("/tmp")]
    assert not hidden, (
        f"{', '.join(hidden)} under /tmp, which the units' PrivateTmp=true hides from them: "
        "run this test from a checkout and a Python outside /tmp"
    )
    with booted(units=tmp_path / "units", etc=tmp_path / "etc", read_only=read_only, check=check,
                target="hookinbox-check.target") as container:  # fmt: skip

        def ready() -> bool:
            assert container.process.poll() is None, container.console()
            try:
                return httpx.get(f"{serve}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(ready, timeout=BOOT_TIMEOUT, what="serve's /readyz in the container",
                 describe=container.console, interval=0.5)  # fmt: skip
        for number in range(EVENTS):
            headers, body = stripe_delivery(checkout(f"s{number}", f"pi_serve_{number}"),
                                            shipping.STRIPE_SECRET)  # fmt: skip
            answer = httpx.post(f"{serve}/webhooks/stripe", headers=headers, content=body)
            assert answer.status_code == 200, answer.text
        expected = {f"pi_{name}_{n}" for name in NAMES for n in range(EVENTS)}
        wait_for(lambda: _orders(server) >= expected, timeout=60,
                 what="every unit's shipments over HTTPS",
                 describe=lambda: f"got {sorted(_orders(server))}")  # fmt: skip
        for name in ("worker", "relay"):  # /proc/stat and /proc/self readable: process_*
            metrics = httpx.get(f"http://127.0.0.1:{ports[f'{name} metrics']}/metrics").text
            assert "process_resident_memory_bytes" in metrics, metrics[-2000:]
        time.sleep(0.5)  # a unit that dies right after its job shows as restarted below
        (check / "go").touch()
        assert container.wait(timeout=60) == 0, container.console()

    for name in NAMES:
        unit = f"hookinbox-{name}"
        running = _report(check, f"{unit}.running")
        log = (check / f"{unit}.log").read_text()
        assert running["ActiveState"] == "active" and running["NRestarts"] == "0", (running, log)
        assert running["NoNewPrivs"] == "1" and running["Seccomp"] == "2", running
        assert int(running["CapEff"], 16) == 0 and int(running["CapBnd"], 16) == 0, running
        exposure = re.search(r"exposure level for \S+: (\d+\.\d+)", (check / f"{unit}.running")
                             .read_text())  # fmt: skip
        assert exposure and float(exposure[1]) <= MOST_EXPOSURE, running
        stopped = _report(check, f"{unit}.stopped")
        assert stopped["Result"] == "success", (stopped, log)
        assert "Traceback" not in log, log
    state = (check / "state-files").read_text().split("\n")
    modes = {line.split()[0]: line.split()[1:] for line in state if line}
    assert modes["/var/lib/hookinbox"] == ["700", "hookinbox"], modes
    assert modes["/var/lib/hookinbox/hookinbox.db"] == ["600", "hookinbox"], modes
    files = [path for path in modes if path != "/var/lib/hookinbox"]  # -wal and -shm too
    assert all(modes[path] == ["600", "hookinbox"] for path in files), modes
    probe = json.loads((check / "probe.json").read_text())
    assert probe == {
        "ctypes_callback": 42,
        "cffi_callback": "MemoryError",  # docs/deployment.md: MemoryDenyWriteExecute
        "writable_and_executable_memory": "EPERM",
        "read_environment_file": "EACCES",
        "netlink_socket": "EAFNOSUPPORT",
        "cpu_affinity": "EPERM",
        "write_outside_state": "EROFS",
        "write_in_state": "0o600",
    }, probe
