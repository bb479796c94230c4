"""Finding the user's `Inbox` from a `module:attribute` string, with one-line errors."""

from __future__ import annotations

import importlib
import os
import sys

from hookinbox._errors import ConfigurationError
from hookinbox._inbox import BaseInbox, Inbox, check_overrides_applied
from hookinbox._settings import Overrides, overriding

APP_ENV = "HOOKINBOX_APP"


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
    when the module constructs its inbox.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(f"APP must look like module:attribute, got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: the user's app is usually here
    try:
        with overriding(overrides or Overrides()):
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
    if not isinstance(target, BaseInbox):
        raise ConfigurationError(f"{spec} is a {type(target).__name__}, not a hookinbox Inbox")
    with overriding(overrides or Overrides()):
        check_overrides_applied(target)
    return target
