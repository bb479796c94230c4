"""Finding the user's `Inbox` from a `module:attribute` string, with one-line errors."""

from __future__ import annotations

import importlib
import os
import sys

from hookinbox._errors import ConfigurationError
from hookinbox._inbox import Inbox

APP_ENV = "HOOKINBOX_APP"


def load_inbox(spec: str, *, database_url: str | None = None) -> Inbox:
    """Import `module:attribute` (the attribute may be dotted) and check it is an `Inbox`."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(f"APP must look like module:attribute, got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: the user's app is usually here
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigurationError(f"cannot import {module_name!r}: no such module") from exc
        raise ConfigurationError(f"importing {module_name!r} failed: {exc}") from exc
    except Exception as exc:
        raise ConfigurationError(
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    target: object = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise ConfigurationError(f"{module_name!r} has no attribute {attribute!r}") from exc
    if not isinstance(target, Inbox):
        raise ConfigurationError(f"{spec} is a {type(target).__name__}, not a hookinbox Inbox")
    if database_url:
        target.use_database(database_url)
    return target
