"""Finding the user's `Inbox` from a `module:attribute` string, with one-line errors.

Whatever goes wrong while the user's module imports is told in one line that names the
user's own file and line (not hookinbox's, not importlib's): that is where the fix goes.
"""

from __future__ import annotations

import importlib
import os
import sys
import sysconfig
import traceback
from pathlib import Path

from hookinbox._errors import ConfigurationError, HookinboxError
from hookinbox._inbox import BaseInbox, Inbox, check_overrides_applied
from hookinbox._settings import Overrides, overriding


def load_inbox(
    spec: str, *, database_url: str | None = None, overrides: Overrides | None = None
) -> Inbox:
    """Import `module:attribute` naming an `Inbox` (with a database), the CLI's settings
    (`overrides`, or just `database_url`) applied while the module builds it."""
    inbox = load_app(spec, overrides=overrides or Overrides(database_url=database_url))
    if not isinstance(inbox, Inbox):
        raise ConfigurationError(
            f"{spec} is a {type(inbox).__name__}: it keeps no database, and this command works "
            "on an inbox's database"
        )
    return inbox


def load_app(spec: str, *, overrides: Overrides | None = None) -> BaseInbox:
    """Import `module:attribute` (the attribute may be dotted) and check it is an inbox.

    The module is imported inside `overriding(overrides)`: the command line's settings apply
    when the module constructs its inbox; nothing is patched into it afterwards.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(f"APP must look like module:attribute, got {spec!r}")
    _refuse_path(module_name, attribute)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: the user's app is usually here
    # The attribute is read inside the overrides too: a module `__getattr__` may build the
    # inbox on first access.
    with overriding(overrides or Overrides()):
        target: object = _import(module_name)
        for part in attribute.split("."):
            try:
                target = getattr(target, part)
            except AttributeError as exc:
                raise ConfigurationError(f"{module_name!r} has no attribute {attribute!r}") from exc
        if not isinstance(target, BaseInbox):
            raise ConfigurationError(f"{spec} is a {type(target).__name__}, not a hookinbox Inbox")
        check_overrides_applied(target)
    return target


def _refuse_path(module_name: str, attribute: str) -> None:
    """`../shop.py:inbox` is a file path; importlib would answer with a puzzle. Say what to do."""
    if "/" not in module_name and os.sep not in module_name and not module_name.endswith(".py"):
        return
    path = Path(module_name)
    name = path.stem if path.suffix == ".py" else path.name
    folder = str(path.parent)
    where = "" if folder == "." else f" from {folder} (cd {folder}, or PYTHONPATH={folder})"
    raise ConfigurationError(
        f"APP is module:attribute, not a file path: use {name}:{attribute}{where}"
    )


def _import(module_name: str) -> object:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigurationError(f"cannot import {module_name!r}: no such module") from exc
        raise ConfigurationError(
            f"importing {module_name!r} failed: {_where(exc)}ModuleNotFoundError: {exc}"
        ) from exc
    except SyntaxError as exc:  # the offending line is in the error itself, not a frame
        location = f"{_shown(exc.filename)}:{exc.lineno}: " if exc.filename else ""
        raise ConfigurationError(
            f"importing {module_name!r} failed: {location}SyntaxError: {exc.msg}"
        ) from exc
    except OSError as exc:  # a file the app reads cannot be (permissions, missing, a dead mount)
        what = _shown(exc.filename) if exc.filename else module_name
        raise ConfigurationError(
            f"importing {module_name!r} failed: {_where(exc)}cannot read {what}: "
            f"{exc.strerror or exc}"
        ) from exc
    except HookinboxError as exc:  # the inbox refused its own set-up: say where it was made
        raise ConfigurationError(f"{_where(exc)}{exc}") from exc
    except Exception as exc:
        raise ConfigurationError(
            f"importing {module_name!r} failed: {_where(exc)}{type(exc).__name__}: {exc}"
        ) from exc


def _where(error: BaseException) -> str:
    """`file:line: ` of the innermost frame in the user's code (else in any code that is not
    importlib's or an installed library's), or empty if there is none."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if _is_code(f.filename)]
    ours = [f for f in frames if not _is_hookinbox(f.filename)] or frames
    return f"{_shown(ours[-1].filename)}:{ours[-1].lineno}: " if ours else ""


_PACKAGE = str(Path(__file__).resolve().parents[1])
_LIBRARIES = {
    str(Path(p).resolve())
    for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (p := sysconfig.get_paths().get(key))
}


def _is_code(filename: str) -> bool:
    """Not importlib's (`<frozen ...>`), not the standard library's or an installed package's."""
    if filename.startswith("<"):
        return False
    path = str(Path(filename).resolve())
    return _is_hookinbox(filename) or not any(path.startswith(p) for p in _LIBRARIES)


def _is_hookinbox(filename: str) -> bool:
    return str(Path(filename).resolve()).startswith(_PACKAGE + os.sep)


def _shown(filename: str) -> str:
    """A path relative to the current directory when it is below it: short, and clickable."""
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive (Windows)
        return filename
    return filename if relative.startswith("..") else relative
