"""The `hookinbox` command.

Exit codes: 0 success; 1 the operation failed (database unavailable, a check breached);
2 bad usage or configuration (unknown APP, malformed URL). Errors are one line on stderr.
"""

from __future__ import annotations

import copy
import logging
import logging.config
import os
import shutil
import signal
import sys
import tempfile
from typing import Any

import click

from hookinbox._errors import ConfigurationError, HookinboxError, StoreUnavailable
from hookinbox._inbox import Inbox
from hookinbox._metrics import MULTIPROCESS_ENV, serve_metrics
from hookinbox._processing import Worker, WorkerOptions
from hookinbox._settings import DATABASE_URL_ENV
from hookinbox._storage import Store
from hookinbox.cli._asgi import (
    ACK_DEADLINE_ENV,
    BODY_TIMEOUT_ENV,
    GROUP_COMMIT_ENV,
    overrides_from_environment,
)
from hookinbox.cli._dashboard import admin_token_option, dashboard_settings
from hookinbox.cli._dashboard import register as register_dashboard
from hookinbox.cli._demo import register as register_demo
from hookinbox.cli._loading import APP_ENV, load_app, load_inbox
from hookinbox.cli._ops import register as register_operations
from hookinbox.cli._simulate import register as register_simulate
from hookinbox.cli._supervise import WorkerSupervisor
from hookinbox.dashboard._auth import ADMIN_TOKEN_ENV

EXIT_FAILURE = 1
EXIT_USAGE = 2

database_url_option = click.option(
    "--database-url",
    envvar=DATABASE_URL_ENV,
    show_envvar=True,
    help="Database URL (sqlite:///file.db or postgresql://...); overrides the app's own.",
)


class HookinboxGroup(click.Group):
    """Turns hookinbox errors into one line on stderr and a documented exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConfigurationError as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(EXIT_USAGE)
        except StoreUnavailable as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(EXIT_FAILURE)
        except HookinboxError as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(EXIT_FAILURE)
        except click.UsageError as error:
            hint = f"; see `{error.ctx.command_path} --help`" if error.ctx else ""
            click.echo(f"error: {error.format_message()}{hint}", err=True)
            sys.exit(EXIT_USAGE)
        except click.ClickException as error:  # e.g. an unknown event: the operation failed
            click.echo(f"error: {error.format_message()}", err=True)
            sys.exit(EXIT_FAILURE)


@click.group(cls=HookinboxGroup)
@click.version_option(package_name="hookinbox")
def main() -> None:
    """hookinbox: verified, deduplicated, durable webhooks, processed exactly once."""


LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def logging_config(level: str, log_format: str = "text") -> dict[str, Any]:
    """uvicorn's logging configuration, with hookinbox's loggers on the same handler."""
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
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        config["loggers"][name]["level"] = level
    return config


def configure_logging(level: str, log_format: str = "text") -> None:
    logging.config.dictConfig(logging_config(level.upper(), log_format))


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
    type=click.IntRange(1, 256),
    envvar="HOOKINBOX_CONCURRENCY",
    show_envvar=True,
    help="Events processed at once by the worker (threads).",
)
relay_concurrency_option = click.option(
    "--relay-concurrency",
    default=4,
    show_default=True,
    type=click.IntRange(1, 256),
    envvar="HOOKINBOX_RELAY_CONCURRENCY",
    show_envvar=True,
    help="Outbox messages delivered at once (threads).",
)
lease_option = click.option(
    "--lease-seconds",
    default=60.0,
    show_default=True,
    type=click.FloatRange(0.5, 86400),
    envvar="HOOKINBOX_LEASE_SECONDS",
    show_envvar=True,
    help="How soon an event held by a killed worker is retried.",
)
grace_option = click.option(
    "--grace-period",
    default=30.0,
    show_default=True,
    type=click.FloatRange(0, 3600),
    envvar="HOOKINBOX_GRACE_PERIOD",
    show_envvar=True,
    help="On SIGTERM, seconds to let attempts in flight finish.",
)


@main.command()
@click.argument("app", envvar=APP_ENV)
@database_url_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    envvar="HOOKINBOX_HOST",
    show_envvar=True,
    help="Interface to listen on.",
)
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    envvar="HOOKINBOX_PORT",
    show_envvar=True,
    help="Port to listen on.",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    envvar="HOOKINBOX_WORKERS",
    show_envvar=True,
    help="HTTP server processes.",
)
@log_level_option
@log_format_option
@click.option(
    "--no-worker",
    is_flag=True,
    envvar="HOOKINBOX_NO_WORKER",
    show_envvar=True,
    help="Only receive; process events with separate `hookinbox worker` processes.",
)
@click.option(
    "--no-group-commit",
    is_flag=True,
    envvar="HOOKINBOX_NO_GROUP_COMMIT",
    show_envvar=True,
    help="Store each delivery in its own transaction (see docs/ingest.md, group commit).",
)
@click.option(
    "--ack-deadline",
    type=click.FloatRange(0, 60),
    default=None,
    envvar=ACK_DEADLINE_ENV,
    show_envvar=True,
    metavar="SECONDS",
    help="Answer 503 to a delivery not stored within SECONDS (default: the inbox's, 3); "
    "0 turns the deadline off.",
)
@click.option(
    "--body-timeout",
    type=click.FloatRange(0, 300, min_open=True),
    default=None,
    envvar=BODY_TIMEOUT_ENV,
    show_envvar=True,
    metavar="SECONDS",
    help="Answer 408 to a delivery whose body has not arrived within SECONDS "
    "(default: the inbox's, 10).",
)
@admin_token_option
@concurrency_option
@lease_option
@grace_option
def serve(
    app: str,
    database_url: str | None,
    host: str,
    port: int,
    workers: int,
    log_level: str,
    log_format: str,
    no_worker: bool,
    no_group_commit: bool,
    ack_deadline: float | None,
    body_timeout: float | None,
    admin_token: str | None,
    concurrency: int,
    lease_seconds: float,
    grace_period: float,
) -> None:
    """Receive webhooks for APP (module:attribute naming an Inbox) over HTTP.

    The schema is created or upgraded before the server starts listening. Unless --no-worker,
    a `hookinbox worker` process runs alongside and stops with the server. An inbox with
    Redis claims has neither: its handlers run in the request. With an admin token, the
    operator dashboard is served at /admin (docs/dashboard.md).
    """
    import uvicorn

    if admin_token:
        dashboard_settings(admin_token)  # a short token or a bad threshold stops us here

    # Before anything imports prometheus_client: every process of this tree (HTTP servers,
    # worker) counts into files in one directory, and /metrics adds them up.
    own_metrics_dir = None
    if not os.environ.get(MULTIPROCESS_ENV):
        own_metrics_dir = tempfile.mkdtemp(prefix="hookinbox-metrics-")
        os.environ[MULTIPROCESS_ENV] = own_metrics_dir
    # This process and each server process (the factory re-imports APP) build the inbox with
    # the same settings: the command line's, handed over in the environment.
    os.environ[APP_ENV] = app
    if database_url:
        os.environ[DATABASE_URL_ENV] = database_url
    if no_group_commit:
        os.environ[GROUP_COMMIT_ENV] = "off"
    if ack_deadline is not None:
        os.environ[ACK_DEADLINE_ENV] = f"{ack_deadline:g}"
    if body_timeout is not None:
        os.environ[BODY_TIMEOUT_ENV] = f"{body_timeout:g}"
    inbox = load_app(app, overrides=overrides_from_environment())
    if isinstance(inbox, Inbox):
        inbox.migrate()
    else:
        no_worker = True  # Redis claim mode: handlers run in the request; no schema, no queue
    inbox.close()
    if admin_token:
        os.environ[ADMIN_TOKEN_ENV] = admin_token
    supervisor = None
    if not no_worker:
        command = [
            sys.executable, "-m", "hookinbox", "worker", app,
            "--concurrency", str(concurrency),
            "--lease-seconds", str(lease_seconds),
            "--grace-period", str(grace_period),
            "--log-level", log_level,
            "--log-format", log_format,
            "--parent-pid", str(os.getpid()),  # it stops by itself if this process is killed
        ]  # fmt: skip
        supervisor = WorkerSupervisor(command, grace_period)
        supervisor.start()
    # uvicorn re-raises the signal that stopped it once it is done, to whatever handler was
    # installed before it ran; with the default one the process would die right there, before
    # the worker is drained. A handler that does nothing lets us shut down in order, exit 0.
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, lambda _signum, _frame: None)
    try:
        uvicorn.run(
            "hookinbox.cli._asgi:app_from_environment",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            access_log=False,  # hookinbox logs one line per delivery itself
            log_config=logging_config(log_level.upper(), log_format),
            timeout_graceful_shutdown=10,
        )
    finally:
        if supervisor is not None:
            supervisor.stop()
        if own_metrics_dir is not None:
            shutil.rmtree(own_metrics_dir, ignore_errors=True)


@main.command()
@click.argument("app", envvar=APP_ENV)
@database_url_option
@concurrency_option
@lease_option
@grace_option
@click.option(
    "--poll-interval",
    type=click.FloatRange(0.01, 3600),
    default=None,
    envvar="HOOKINBOX_POLL_INTERVAL",
    show_envvar=True,
    help="Seconds between checks when nothing wakes the worker [default: 0.05 SQLite, 1 PG].",
)
@click.option("--parent-pid", type=int, default=None, hidden=True)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    envvar="HOOKINBOX_METRICS_PORT",
    show_envvar=True,
    help="Serve Prometheus metrics on this port (a worker run on its own).",
)
@click.option(
    "--no-relay",
    is_flag=True,
    envvar="HOOKINBOX_NO_RELAY",
    show_envvar=True,
    help="Do not deliver outbox messages (run `hookinbox relay` elsewhere).",
)
@relay_concurrency_option
@log_level_option
@log_format_option
def worker(
    app: str,
    database_url: str | None,
    concurrency: int,
    lease_seconds: float,
    grace_period: float,
    poll_interval: float | None,
    parent_pid: int | None,
    metrics_port: int | None,
    no_relay: bool,
    relay_concurrency: int,
    log_level: str,
    log_format: str,
) -> None:
    """Process APP's stored events, and deliver its outbox messages, until SIGTERM or SIGINT.

    On SIGTERM the worker stops leasing and lets the attempts in flight finish within
    --grace-period, then exits 0; if some are still running it exits 1 at once, and those
    attempts roll back with the process (their events are retried after their lease expires).
    Run as many workers as you like, on any number of machines.
    """
    configure_logging(log_level, log_format)
    inbox = load_inbox(app, database_url=database_url)
    options = WorkerOptions(
        concurrency=concurrency,
        relay_concurrency=relay_concurrency,
        lease_seconds=lease_seconds,
        grace_period=grace_period,
        poll_interval=poll_interval,
        parent_pid=parent_pid,
    )
    run_until_stopped(inbox, inbox.worker(options, relay=not no_relay), metrics_port)


@main.command()
@click.argument("app", envvar=APP_ENV)
@database_url_option
@relay_concurrency_option
@lease_option
@grace_option
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    envvar="HOOKINBOX_METRICS_PORT",
    show_envvar=True,
    help="Serve Prometheus metrics on this port.",
)
@log_level_option
@log_format_option
def relay(
    app: str,
    database_url: str | None,
    relay_concurrency: int,
    lease_seconds: float,
    grace_period: float,
    metrics_port: int | None,
    log_level: str,
    log_format: str,
) -> None:
    """Deliver APP's outbox messages until SIGTERM (`worker` does this too, unless --no-relay)."""
    configure_logging(log_level, log_format)
    inbox = load_inbox(app, database_url=database_url)
    options = WorkerOptions(
        relay_concurrency=relay_concurrency, lease_seconds=lease_seconds, grace_period=grace_period
    )
    run_until_stopped(inbox, inbox.relay_only(options), metrics_port)


def run_until_stopped(inbox: Inbox, worker: Worker, metrics_port: int | None) -> None:
    """Run a worker until SIGTERM; exit 1 at once if attempts outlive the grace period."""
    if metrics_port is not None:
        serve_metrics(inbox.store, metrics_port)
    try:
        drained = worker.run()
    finally:
        inbox.close()
    if not drained:
        # Handler threads are still running; a normal exit would wait for them (and let the
        # cut-off attempts commit after the grace period). End the process now instead.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_FAILURE)


@main.command()
@click.argument("app", required=False, envvar=APP_ENV)
@database_url_option
def migrate(app: str | None, database_url: str | None) -> None:
    """Create or upgrade hookinbox's tables (for APP, or the database at --database-url)."""
    if app:
        inbox = load_inbox(app, database_url=database_url)
        before, after = inbox.migrate()  # checks the app's handlers and sources first
        inbox.close()
    elif database_url:
        store = Store(database_url)
        before, after = store.migrate()
        store.dispose()
    else:
        raise ConfigurationError("give APP or --database-url")
    if before == after:
        click.echo(f"schema is up to date (version {after})")
    else:
        click.echo(f"schema upgraded from version {before} to {after}")


register_operations(main)
register_simulate(main)
register_demo(main)
register_dashboard(main)
