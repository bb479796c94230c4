"""A real systemd booted in a throwaway container (systemd-nspawn), to start units as shipped.

This machine's PID 1 is not systemd, so `systemctl start` cannot run a unit here. nspawn boots
the host's own systemd as the PID 1 of a container: a tmpfs root with this machine's /usr,
its /etc under an overlay whose upper directory is the test's (its passwd, group and
configuration files; writes land there), the test's units as /etc/systemd/system, the paths
the test needs bound read-only, and the host's network shared, so that services in the container
reach the loopback databases and servers of the test and the test reaches theirs. Nothing the
container writes outlives it but what it puts in its `/check` directory.

nspawn, not run under a systemd, makes cgroups under its own: it is started in a cgroup of
its own in each hierarchy it uses, removed when it is done.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CGROUP_HIERARCHIES = ("/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified", "/sys/fs/cgroup")
"""Where nspawn puts the container's cgroups: the named systemd hierarchy and cgroup2's, on
a hybrid hierarchy; on a unified one, cgroup2 alone at /sys/fs/cgroup."""


def missing() -> str | None:
    """Why no container can boot here, or None."""
    if os.geteuid() != 0:
        return "booting a container needs root"
    if shutil.which("systemd-nspawn") is None:
        return "systemd-nspawn is not installed (apt-get install systemd-container)"
    if not Path("/lib/systemd/systemd").exists():
        return "systemd is not installed"
    return None


@dataclass(frozen=True)
class Container:
    process: subprocess.Popen[bytes]
    check: Path
    """Bound at /check in the container, writable: what its units report."""
    log: Path

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def console(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]


def _cgroups(name: str) -> list[Path]:
    found = []
    for hierarchy in map(Path, CGROUP_HIERARCHIES):
        if (hierarchy / "cgroup.procs").exists():  # a hierarchy, not the tmpfs holding them
            found.append(hierarchy / name)
    return found


def _kill_all(group: Path) -> None:
    """SIGKILL what is left in the container's cgroups: its processes only, as they were
    started in them."""
    for procs in group.rglob("cgroup.procs"):
        for pid in procs.read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _remove_tree(directory: Path, timeout: float = 10) -> None:
    """rmdir, the deepest first; a cgroup whose last process is still dying is busy a moment."""
    if not directory.is_dir():
        return
    children = [p for p in directory.rglob("*") if p.is_dir()]
    for group in [*sorted(children, key=lambda p: len(p.parts), reverse=True), directory]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                group.rmdir()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


@contextmanager
def booted(
    *,
    units: Path,
    etc: Path,
    read_only: list[Path],
    check: Path,
    target: str,
    timeout: float = 30,
) -> Iterator[Container]:
    """systemd booted into `target`, with `units` as /etc/systemd/system, `etc` over the
    host's /etc, `read_only` paths bound where they are, and `check` at /check. Stopped (a
    poweroff, then SIGKILL) on the way out."""
    groups = _cgroups(f"hookinbox-test-{uuid.uuid4().hex[:8]}")
    for group in groups:
        group.mkdir()

    def enter_cgroups() -> None:  # in the child, before nspawn runs
        for group in groups:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    binds = [f"--overlay=/etc:{etc}:/etc", f"--bind-ro={units}:/etc/systemd/system"]
    binds += [f"--bind={check}:/check", *(f"--bind-ro={path}" for path in read_only)]
    log = check.parent / "console.log"
    command = [
        "systemd-nspawn", "--quiet", "--directory=/", "--volatile=yes",
        *binds, "--register=no", "--keep-unit", "--link-journal=no",
        f"--machine=hookinbox-{uuid.uuid4().hex[:8]}",
        "--boot", f"systemd.unit={target}",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=enter_cgroups,  # the child has no threads yet: safe
        )
    container = Container(process, check, log)
    try:
        yield container
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # nspawn asks the container's systemd to halt
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=timeout)
        for group in groups:
            _kill_all(group)
        for group in groups:
            _remove_tree(group)
