"""Optional features: the extra that installs each, and one line naming it when it is missing.

`pip install hookinbox` is what an application needs inside its own process to verify, store
and process webhooks (docs/architecture.md, "What belongs in the core"). Servers, drivers,
provider-specific crypto, metrics and terminal niceties are extras (docs/install.md). A feature
checks for its extra where it is used, never when hookinbox is imported: an application that
does not use it neither installs nor imports it, and one that does learns which extra to add
from one line instead of a `ModuleNotFoundError` from deep inside.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from hookinbox._errors import MissingExtra


@dataclass(frozen=True, slots=True)
class Extra:
    what: str
    """What it brings, as the error line says it: "the HTTP server (uvicorn)"."""
    modules: tuple[str, ...]
    """The top-level modules it installs that hookinbox imports."""


EXTRAS: dict[str, Extra] = {
    "server": Extra("the HTTP server (uvicorn)", ("uvicorn",)),
    "granian": Extra("the Granian HTTP server (granian)", ("granian",)),
    "postgres": Extra("the PostgreSQL driver (psycopg)", ("psycopg",)),
    "mysql": Extra("the MariaDB driver (PyMySQL)", ("pymysql",)),
    # The async worker's drivers: SQLAlchemy's asyncio support (greenlet) and the driver; an
    # async PostgreSQL URL keeps psycopg for hookinbox's own work (ingest, migrations, CLI).
    "asyncpg": Extra(
        "the async PostgreSQL driver asyncpg (with psycopg and greenlet)",
        ("asyncpg", "psycopg", "greenlet"),
    ),
    "postgres-async": Extra("psycopg's async mode (psycopg and greenlet)", ("psycopg", "greenlet")),
    "aiosqlite": Extra(
        "the async SQLite driver aiosqlite (with greenlet)", ("aiosqlite", "greenlet")
    ),
    "metrics": Extra("the Prometheus client (prometheus_client)", ("prometheus_client",)),
    "dashboard": Extra(
        "the dashboard's web stack (starlette, jinja2, itsdangerous, uvicorn)",
        ("starlette", "jinja2", "itsdangerous", "uvicorn"),
    ),
    "cli": Extra("colour tables (rich)", ("rich",)),
    "paypal": Extra(
        "PayPal's certificate checks (cryptography, httpx)", ("cryptography", "httpx", "certifi")
    ),
    "crypto": Extra("public-key signature checks (cryptography)", ("cryptography",)),
    "encryption": Extra("encryption at rest (cryptography)", ("cryptography",)),
    "jwt": Extra("JSON Web Token checks (PyJWT)", ("jwt",)),
    "keys": Extra(
        "keys fetched from the provider (cryptography, httpx, PyJWT)",
        ("cryptography", "httpx", "certifi", "jwt"),
    ),
    "mollie": Extra("an HTTP client for Mollie's API (httpx)", ("httpx",)),
    "http": Extra("an HTTP client (httpx)", ("httpx",)),
    "simulate": Extra("the simulator (httpx, rich)", ("httpx", "rich")),
    "redis": Extra("the Redis client (redis)", ("redis",)),
    "rabbitmq": Extra("the RabbitMQ client (aio-pika)", ("aio_pika", "aiormq")),
    "nats": Extra("the NATS client (nats-py)", ("nats",)),
    "otel": Extra("the OpenTelemetry API (opentelemetry-api)", ("opentelemetry",)),
}


def installed(module: str) -> bool:
    """Whether `module` can be imported, found without importing it (no import cost)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a module already imported with no spec (`__main__`, some stubs)
        return True


def missing_extras(*extras: str) -> tuple[str, ...]:
    """Those of `extras` that are not (completely) installed."""
    return tuple(e for e in extras if not all(installed(m) for m in EXTRAS[e].modules))


def require(feature: str, *extras: str) -> None:
    """Raise `MissingExtra` (one line naming what to install) unless `extras` are installed."""
    absent = missing_extras(*extras)
    if absent:
        raise missing(feature, *absent)


def missing(feature: str, *extras: str) -> MissingExtra:
    return MissingExtra(feature, extras, " and ".join(EXTRAS[e].what for e in extras))


@contextmanager
def importing(feature: str, *extras: str) -> Iterator[None]:
    """Turn the `ModuleNotFoundError` of a module the `extras` install into `MissingExtra`.

    For imports that cannot wait until a `require` call (a lazily loaded public name): a
    module missing for another reason (a bug, a broken install) still raises as it is.
    """
    try:
        yield
    except ModuleNotFoundError as error:
        top = (error.name or "").partition(".")[0]
        if any(top in EXTRAS[e].modules for e in extras):
            raise missing(feature, *extras) from error
        raise
