"""Running a command on a pseudo-terminal, as a person at a terminal emulator would."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from collections.abc import Sequence

from tests.support.server import ROOT, hookinbox_command


def run_on_a_terminal(
    args: Sequence[str], *, columns: int = 200, rows: int = 60, answer: bytes | None = None
) -> tuple[str, int]:
    """Run the command with a pseudo-terminal as stdin, stdout and stderr, its window
    `columns` wide (set on the terminal, as an emulator sets it: not told by $COLUMNS); type
    `answer` at the first `[y/N]` prompt. Returns what it wrote and its exit code."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    process = subprocess.Popen(
        hookinbox_command(*args),
        cwd=ROOT,
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env={**environment, "TERM": "xterm"},
    )
    os.close(terminal)
    output = b""
    deadline = time.monotonic() + 60
    answered = answer is None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the command exited and closed the terminal
                break
            if not chunk:
                break
            output += chunk
        if not answered and b"[y/N]" in output:
            os.write(controller, answer or b"")
            answered = True
        if process.poll() is not None and not ready:
            break
    code = process.wait(timeout=30)
    os.close(controller)
    return output.decode("utf-8", "replace"), code
