"""Run in the container under the serve unit's sandbox (tests/deploy/test_units_in_systemd.py):
what works there that hookinbox or an application may need, and what the sandbox refuses.
Prints one JSON object: each check's result, or the name of the error it met."""

from __future__ import annotations

import ctypes
import errno
import json
import mmap
import os
import socket
from collections.abc import Callable


def outcome(check: Callable[[], object]) -> object:
    try:
        return check()
    except OSError as error:
        return errno.errorcode.get(error.errno or 0, str(error))
    except MemoryError:  # cffi's answer when it may not map memory writable and executable
        return "MemoryError"


def ctypes_callback() -> object:
    """A C function pointer to Python code: libffi's closures (psycopg's and ctypes' users)."""
    plus_one = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda number: number + 1)
    return plus_one(41)


def cffi_callback() -> object:
    """cffi's ffi.callback() (ABI mode: pyOpenSSL's callbacks, some older bindings) writes code
    into memory it then runs; cffi's "extern Python" (API mode) does not."""
    import cffi

    ffi = cffi.FFI()
    plus_one = ffi.callback("int(int)", lambda number: number + 1)
    return plus_one(41)


def writable_and_executable_memory() -> object:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC).close()
    return "mapped"


def read_environment_file() -> object:
    with open("/etc/hookinbox/hookinbox.env") as file:
        return f"read {len(file.read())} characters"


def netlink_socket() -> object:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close()
    return "opened"


def cpu_affinity() -> object:
    """@resources: setting one's own CPU affinity, harmless, and refused by the filter."""
    os.sched_setaffinity(0, os.sched_getaffinity(0))
    return "set"


def write_outside_state() -> object:
    with open(os.path.join(os.getcwd(), "probe-was-here"), "w"):
        return "written"


def write_in_state() -> object:
    path = "/var/lib/hookinbox/probe"
    with open(path, "w"):
        pass
    mode = oct(os.stat(path).st_mode & 0o777)
    os.unlink(path)
    return mode


CHECKS = {
    "ctypes_callback": ctypes_callback,
    "cffi_callback": cffi_callback,
    "writable_and_executable_memory": writable_and_executable_memory,
    "read_environment_file": read_environment_file,
    "netlink_socket": netlink_socket,
    "cpu_affinity": cpu_affinity,
    "write_outside_state": write_outside_state,
    "write_in_state": write_in_state,
}

if __name__ == "__main__":
    print(json.dumps({name: outcome(check) for name, check in CHECKS.items()}))
