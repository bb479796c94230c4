"""Arguments and options several commands share, and the variables behind them.

Only click and the leaf table of ranges (`hookinbox._ranges`) are imported here: a command's
`--help` shows these without loading hookinbox's storage. The variable names are the ones the
library reads (a test checks they agree).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import click

from hookinbox import _ranges as ranges
from hookinbox.cli._types import number

APP_ENV = "HOOKINBOX_APP"
DATABASE_URL_ENV = "HOOKINBOX_DATABASE_URL"
GROUP_COMMIT_ENV = "HOOKINBOX_GROUP_COMMIT"
WAKE_SOCKET_ENV = "HOOKINBOX_WAKE_SOCKET"
"""Set by `serve` for its HTTP processes (not a user's setting): where its worker is woken."""
ACK_DEADLINE_ENV = "HOOKINBOX_ACK_DEADLINE"
"""Seconds, set by `serve --ack-deadline` (or by hand); 0 turns the deadline off."""
BODY_TIMEOUT_ENV = "HOOKINBOX_BODY_TIMEOUT"
"""Seconds, set by `serve --body-timeout` (or by hand)."""

F = TypeVar("F", bound=Callable[..., Any])


def app_argument(*, required: bool) -> Callable[[F], F]:
    """APP, the first argument of every command that loads the user's inbox."""
    return click.argument("app", required=required, envvar=APP_ENV)


deprecated_app_option = click.option(
    "--app",
    "app_option",
    hidden=True,  # one way to name the app: APP; deprecated in 0.1.0, removed in 0.3.0
    help="Deprecated: give APP as the first argument.",
)


def resolve_app(app: str | None, app_option: str | None, *, explicit: bool) -> str | None:
    """APP, or the deprecated `--app` (with a warning on stderr).

    `explicit`: APP was given on the command line (not taken from $HOOKINBOX_APP); then an
    `--app` naming another app is a mistake, not a choice between them.
    """
    if app_option is None:
        return app
    click.echo(
        "warning: --app is deprecated and is removed in hookinbox 0.3.0; give APP as the first "
        "argument (hookinbox COMMAND APP ...) or set HOOKINBOX_APP",
        err=True,
    )
    if explicit and app is not None and app != app_option:
        raise click.UsageError(f"APP is given twice: {app} and --app {app_option}")
    return app_option


def from_command_line(name: str) -> bool:
    """Whether parameter `name` of the running command was given on its command line."""
    source = click.get_current_context().get_parameter_source(name)
    return source is click.core.ParameterSource.COMMANDLINE


database_url_option = click.option(
    "--database-url",
    envvar=DATABASE_URL_ENV,
    show_envvar=True,
    help=(
        "Database URL (sqlite:///file.db, postgresql://... or mysql://...); overrides the "
        "app's own."
    ),
)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON document (docs/cli.md, JSON output)."
)
log_level_option = click.option(
    "--log-level",
    default="info",
    show_default=True,
    envvar="HOOKINBOX_LOG_LEVEL",
    show_envvar=True,
    type=click.Choice(["debug", "info", "warning", "error"]),
)
log_format_option = click.option(
    "--log-format",
    default="text",
    show_default=True,
    envvar="HOOKINBOX_LOG_FORMAT",
    show_envvar=True,
    type=click.Choice(["text", "json"]),
    help="json: one JSON object per line with source, event_id, outcome, latency_ms, ...",
)
concurrency_option = click.option(
    "--concurrency",
    default=4,
    show_default=True,
    type=number(ranges.CONCURRENCY),
    envvar="HOOKINBOX_CONCURRENCY",
    show_envvar=True,
    help="Events processed at once by the worker (threads).",
)
relay_concurrency_option = click.option(
    "--relay-concurrency",
    default=4,
    show_default=True,
    type=number(ranges.CONCURRENCY),
    envvar="HOOKINBOX_RELAY_CONCURRENCY",
    show_envvar=True,
    help="Outbox messages delivered at once (threads).",
)
lease_option = click.option(
    "--lease-seconds",
    default=60.0,
    show_default=True,
    type=number(ranges.LEASE_SECONDS),
    envvar="HOOKINBOX_LEASE_SECONDS",
    show_envvar=True,
    help="How soon an event held by a killed worker is retried.",
)
grace_option = click.option(
    "--grace-period",
    default=30.0,
    show_default=True,
    type=number(ranges.GRACE_PERIOD),
    envvar="HOOKINBOX_GRACE_PERIOD",
    show_envvar=True,
    help="On SIGTERM, seconds to let attempts in flight finish.",
)
heartbeat_option = click.option(
    "--heartbeat-interval",
    default=10.0,
    show_default=True,
    type=number(ranges.HEARTBEAT_INTERVAL),
    envvar="HOOKINBOX_HEARTBEAT_INTERVAL",
    show_envvar=True,
    help="Seconds between liveness beats; alive for 3 intervals after each.",
)
metrics_port_option = click.option(
    "--metrics-port",
    type=number(ranges.METRICS_PORT),
    envvar="HOOKINBOX_METRICS_PORT",
    show_envvar=True,
    help="Serve Prometheus metrics on this port (needs hookinbox[metrics]).",
)


def split_app(values: tuple[str, ...], names: tuple[str, ...]) -> tuple[str | None, list[str]]:
    """`[APP] NAME...`: with one value more than `names`, the first is APP; with as many, APP
    comes from $HOOKINBOX_APP (or is not given: --database-url alone)."""
    import os

    if len(values) == len(names) + 1:
        return values[0], list(values[1:])
    if len(values) == len(names):
        return os.environ.get(APP_ENV) or None, list(values)
    expected = " ".join(("[APP]", *names))
    raise click.UsageError(f"expected {expected}, got {len(values)} argument(s)")


class StoreOptionFlag(NamedTuple):
    """A `StoreOptions` field as a flag of `serve`, `worker` and `relay`, and its variable.

    Spelt out here so that `--help` imports no storage; a test checks every field of
    `StoreOptions` has one, of its type (docs/operations.md has the table)."""

    field: str
    type: click.ParamType[Any]
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")

    @property
    def variable(self) -> str:
        return "HOOKINBOX_" + self.field.upper()


STORE_OPTION_FLAGS = (
    StoreOptionFlag(
        "sqlite_synchronous",
        click.Choice(["FULL", "NORMAL"], case_sensitive=False),
        "SQLite: FULL, a 2xx survives a power cut; NORMAL, a process crash only (~3x faster).",
    ),
    StoreOptionFlag(
        "busy_timeout",
        number(ranges.BUSY_TIMEOUT),
        "SQLite: seconds a writer waits for the write lock before answering 503.",
    ),
    StoreOptionFlag(
        "pool_size", number(ranges.POOL_SIZE), "PostgreSQL: connections each process keeps."
    ),
    StoreOptionFlag(
        "max_overflow",
        number(ranges.MAX_OVERFLOW),
        "PostgreSQL: connections each process may open beyond --pool-size at a peak.",
    ),
    StoreOptionFlag(
        "pool_timeout",
        number(ranges.POOL_TIMEOUT),
        "PostgreSQL: seconds to wait for a free connection before answering 503.",
    ),
    StoreOptionFlag(
        "connect_timeout",
        number(ranges.CONNECT_TIMEOUT),
        "PostgreSQL: seconds to open a connection.",
    ),
    StoreOptionFlag(
        "tcp_timeout",
        number(ranges.TCP_TIMEOUT),
        "PostgreSQL: seconds before a server gone silent is given up (0: the system's).",
    ),
)


def store_option_flags(function: F) -> F:
    """The `StoreOptions` flags, each with its HOOKINBOX_* variable; unset, the app's value."""
    for spec in reversed(STORE_OPTION_FLAGS):
        function = click.option(
            spec.flag,
            spec.field,
            type=spec.type,
            default=None,
            envvar=spec.variable,
            show_envvar=True,
            help=f"{spec.help} [default: the app's StoreOptions]",
        )(function)
    return function


def store_option_values(given: dict[str, Any]) -> tuple[tuple[str, object], ...]:
    """The store options a command was given (by flag or variable), for `Overrides`; each
    taken out of `given`, the command's keyword arguments."""
    chosen = []
    for spec in STORE_OPTION_FLAGS:
        value = given.pop(spec.field, None)
        if value is not None:
            chosen.append((spec.field, value.upper() if isinstance(value, str) else value))
    return tuple(chosen)


def store_options_from_environment() -> tuple[tuple[str, object], ...]:
    """The store options in the environment, as `serve` hands them to its server processes."""
    import os

    chosen = []
    for spec in STORE_OPTION_FLAGS:
        text = os.environ.get(spec.variable)
        if text:
            value = spec.type.convert(text, None, None)
            chosen.append((spec.field, value.upper() if isinstance(value, str) else value))
    return tuple(chosen)
