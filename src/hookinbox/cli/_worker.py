"""`hookinbox worker APP` and `hookinbox relay APP`: processing and the outbox, until SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click

from hookinbox import _ranges as ranges
from hookinbox._extras import require
from hookinbox._processing._worker import Worker
from hookinbox.cli._commands import short_help
from hookinbox.cli._options import (
    app_argument,
    concurrency_option,
    database_url_option,
    grace_option,
    heartbeat_option,
    lease_option,
    log_format_option,
    log_level_option,
    metrics_port_option,
    relay_concurrency_option,
    store_option_flags,
    store_option_values,
)
from hookinbox.cli._reconcile import duration
from hookinbox.cli._types import number

if TYPE_CHECKING:
    from hookinbox._inbox import Inbox
    from hookinbox._processing._async_worker import AsyncWorker

EXIT_NOT_DRAINED = 1


@click.command(short_help=short_help("worker"))
@app_argument(required=True)
@database_url_option
@concurrency_option
@lease_option
@grace_option
@click.option(
    "--poll-interval",
    type=number(ranges.POLL_INTERVAL),
    default=None,
    envvar="HOOKINBOX_POLL_INTERVAL",
    show_envvar=True,
    help="Seconds between checks when nothing wakes the worker [default: 0.05 SQLite, 1 PG].",
)
@click.option("--parent-pid", type=number(ranges.PROCESS_ID), default=None, hidden=True)
@click.option("--wake-socket", default=None, hidden=True)  # serve's, on SQLite
@metrics_port_option
@click.option(
    "--no-relay",
    is_flag=True,
    envvar="HOOKINBOX_NO_RELAY",
    show_envvar=True,
    help="Do not deliver outbox messages (run `hookinbox relay` elsewhere).",
)
@relay_concurrency_option
@heartbeat_option
@click.option(
    "--reconcile-every",
    default=None,
    callback=lambda _ctx, _param, text: reconcile_period(text, "--reconcile-every"),
    envvar="HOOKINBOX_RECONCILE_EVERY",
    show_envvar=True,
    help="Reconcile every source that has API credentials this often (1h, 30m; off by "
    "default): one worker at a time (docs/reconcile.md).",
)
@click.option(
    "--reconcile-timeout",
    default=None,
    callback=lambda _ctx, _param, text: reconcile_period(text, "--reconcile-timeout"),
    envvar="HOOKINBOX_RECONCILE_TIMEOUT",
    show_envvar=True,
    help="The longest one source's reconcile run may take (default 30m).",
)
@click.option(
    "--reconcile-page-timeout",
    default=None,
    callback=lambda _ctx, _param, text: reconcile_period(text, "--reconcile-page-timeout"),
    envvar="HOOKINBOX_RECONCILE_PAGE_TIMEOUT",
    show_envvar=True,
    help="The longest one request of a reconcile run may take (default 60s).",
)
@log_level_option
@log_format_option
@store_option_flags
def worker(
    app: str,
    database_url: str | None,
    concurrency: int,
    lease_seconds: float,
    grace_period: float,
    poll_interval: float | None,
    parent_pid: int | None,
    wake_socket: str | None,
    metrics_port: int | None,
    no_relay: bool,
    relay_concurrency: int,
    heartbeat_interval: float,
    reconcile_every: timedelta | None,
    reconcile_timeout: timedelta | None,
    reconcile_page_timeout: timedelta | None,
    log_level: str,
    log_format: str,
    **store_options: object,
) -> None:
    """Process APP's stored events, and deliver its outbox messages, until SIGTERM or SIGINT.

    On SIGTERM the worker stops leasing and lets the attempts in flight finish within
    --grace-period, then exits 0; if some are still running it exits 1 at once, and those
    attempts roll back with the process (their events are retried after their lease expires).
    Run as many workers as you like, on any number of machines. Each writes a heartbeat
    every --heartbeat-interval seconds: `hookinbox status --check` alarms when none is alive.

    Exit codes: 0 stopped and drained; 1 attempts outlived the grace period, the database is
    unavailable, or the metrics port is taken; 2 bad usage or configuration.
    """
    if metrics_port is not None:
        require("--metrics-port", "metrics")
    from hookinbox._processing import WorkerOptions
    from hookinbox._settings import Overrides
    from hookinbox.cli._loading import load_inbox
    from hookinbox.cli._logs import configure_logging

    configure_logging(log_level, log_format)
    inbox = load_inbox(
        app, overrides=Overrides(database_url, store_options=store_option_values(store_options))
    )
    check_keys(inbox)
    options = WorkerOptions(
        concurrency=concurrency,
        relay_concurrency=relay_concurrency,
        lease_seconds=lease_seconds,
        grace_period=grace_period,
        poll_interval=poll_interval,
        parent_pid=parent_pid,
        wake_socket=wake_socket,
        heartbeat_interval=heartbeat_interval,
    )
    reconcile: dict[str, Any] = {
        "reconcile_every": reconcile_every,
        "reconcile_timeout": reconcile_timeout,
        "reconcile_page_timeout": reconcile_page_timeout,
    }
    built: Worker | AsyncWorker
    if inbox.is_async:  # an async URL: the async worker, on an event loop of its own
        built = inbox.async_worker(options, relay=not no_relay, **reconcile)
    else:
        built = inbox.worker(options, relay=not no_relay, **reconcile)
    run_until_stopped(inbox, built, metrics_port)


@click.command(short_help=short_help("relay"))
@app_argument(required=True)
@database_url_option
@relay_concurrency_option
@lease_option
@grace_option
@heartbeat_option
@metrics_port_option
@log_level_option
@log_format_option
@store_option_flags
def relay(
    app: str,
    database_url: str | None,
    relay_concurrency: int,
    lease_seconds: float,
    grace_period: float,
    heartbeat_interval: float,
    metrics_port: int | None,
    log_level: str,
    log_format: str,
    **store_options: object,
) -> None:
    """Deliver APP's outbox messages until SIGTERM (`worker` does this too, unless --no-relay).

    Exit codes: as `hookinbox worker`.
    """
    if metrics_port is not None:
        require("--metrics-port", "metrics")
    from hookinbox._processing import WorkerOptions
    from hookinbox._settings import Overrides
    from hookinbox.cli._loading import load_inbox
    from hookinbox.cli._logs import configure_logging

    configure_logging(log_level, log_format)
    inbox = load_inbox(
        app, overrides=Overrides(database_url, store_options=store_option_values(store_options))
    )
    options = WorkerOptions(
        relay_concurrency=relay_concurrency,
        lease_seconds=lease_seconds,
        grace_period=grace_period,
        heartbeat_interval=heartbeat_interval,
    )
    built: Worker | AsyncWorker
    if inbox.is_async:
        built = inbox.async_worker(options, events=False)
    else:
        built = inbox.relay_only(options)
    run_until_stopped(inbox, built, metrics_port)


def reconcile_period(text: str | None, option: str) -> timedelta | None:
    """A reconcile duration (`--reconcile-every`, `--reconcile-timeout`,
    `--reconcile-page-timeout`), checked while the command line is parsed (serve parses its
    worker's command line before it starts, so a bad variable stops serve too)."""
    if text is None:
        return None
    try:
        return duration(text, option)
    except click.BadParameter as error:  # click names the option and its variable
        raise click.BadParameter(error.message) from None


def check_keys(inbox: Inbox) -> None:
    """Keys that cannot read what is stored (or none where they must be): one line, exit 2,
    before the worker leases an event it could not read."""
    from hookinbox._inbox import check_encryption
    from hookinbox.cli._target import explained

    with explained(inbox.settings.database_url):
        check_encryption(inbox)


def run_until_stopped(inbox: Inbox, worker: Worker | AsyncWorker, metrics_port: int | None) -> None:
    """Run a worker until SIGTERM; exit 1 at once if attempts outlive the grace period."""
    from hookinbox._metrics import serve_metrics
    from hookinbox._processing._async_worker import AsyncWorker
    from hookinbox.cli._target import explained

    try:
        if metrics_port is not None:
            serve_metrics(inbox._operations(), metrics_port)  # a busy port: one line, exit 1
        with explained(inbox.settings.database_url):
            if isinstance(worker, AsyncWorker):
                drained = run_on_own_loop(inbox, worker)
            else:
                drained = worker.run()
    finally:
        inbox.close()
    if not drained:
        # Handler threads are still running; a normal exit would wait for them (and let the
        # cut-off attempts commit after the grace period). End the process now instead.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_NOT_DRAINED)


def run_on_own_loop(inbox: Inbox, worker: AsyncWorker) -> bool:
    """The async worker on an event loop of its own (uvloop's where it is installed: the
    `server` extra brings it), its pool closed on that loop before it ends."""

    async def run() -> bool:
        try:
            return await worker.run()
        finally:
            await inbox.aclose()

    try:
        import uvloop
    except ImportError:
        return asyncio.run(run())
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(run())
