"""Logging for the long-running commands: hookinbox's lines, and uvicorn's when it serves."""

from __future__ import annotations

import copy
import logging.config
import sys
from typing import Any

from hookinbox._extras import installed

LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def logging_config(level: str, log_format: str = "text") -> dict[str, Any]:
    """uvicorn's logging configuration (when uvicorn is installed: a worker runs without it),
    with hookinbox's loggers on a handler of their own."""
    config: dict[str, Any] = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {},
        "handlers": {},
        "loggers": {},
    }
    uvicorn = installed("uvicorn")
    if uvicorn:
        from uvicorn.config import LOGGING_CONFIG

        config = copy.deepcopy(LOGGING_CONFIG)
    if log_format == "json":
        config["formatters"]["hookinbox"] = {"()": "hookinbox._logging.JSONFormatter"}
        for handler in config["handlers"].values():
            handler["formatter"] = "hookinbox"
    else:
        config["formatters"]["hookinbox"] = {"format": LOG_FORMAT}
    config["handlers"]["hookinbox"] = {
        "formatter": "hookinbox",
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stderr",
    }
    config["loggers"]["hookinbox"] = {"handlers": ["hookinbox"], "level": level, "propagate": False}
    config["loggers"]["alembic"] = {"level": "WARNING"}
    if uvicorn:
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
            config["loggers"][name]["level"] = level
    return config


def configure_logging(level: str, log_format: str = "text") -> None:
    logging.config.dictConfig(logging_config(level.upper(), log_format))


def log_to_stderr_unless_handled(level: str, log_format: str = "text") -> bool:
    """hookinbox's lines on stderr, formatted as `configure_logging` formats them, unless the
    application's logging already handles them (a handler on the `hookinbox` logger or on an
    ancestor, the root above all: Django's LOGGING, for one). That configuration is left as
    it is, level and all. Not `dictConfig`: it would close the handlers the application set
    up. True when the handler was added.

    Without it, a process whose logging nobody configured (Django without LOGGING) shows
    hookinbox's warnings as bare messages through logging's last resort, and nothing else.
    """
    hookinbox = logging.getLogger("hookinbox")
    if hookinbox.hasHandlers():
        return False
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        from hookinbox._logging import JSONFormatter

        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
    hookinbox.addHandler(handler)
    if hookinbox.level == logging.NOTSET:  # a level the application set (alone) is kept
        hookinbox.setLevel(level.upper())
    return True
