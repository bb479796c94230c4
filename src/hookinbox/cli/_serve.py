"""`hookinbox serve APP`: the HTTP server (uvicorn, `hookinbox[server]`, or Granian with
`--server granian`, `hookinbox[granian]`) and its worker."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile

import click

from hookinbox import _ranges as ranges
from hookinbox._errors import HookinboxError
from hookinbox._extras import require
from hookinbox._metrics import MULTIPROCESS_ENV, flush_counts
from hookinbox.cli._commands import short_help
from hookinbox.cli._dashboard import admin_token_option, dashboard_settings
from hookinbox.cli._options import (
    ACK_DEADLINE_ENV,
    APP_ENV,
    BODY_TIMEOUT_ENV,
    DATABASE_URL_ENV,
    GROUP_COMMIT_ENV,
    STORE_OPTION_FLAGS,
    WAKE_SOCKET_ENV,
    StoreOptionFlag,
    app_argument,
    concurrency_option,
    database_url_option,
    grace_option,
    lease_option,
    log_format_option,
    log_level_option,
    store_option_flags,
    store_option_values,
)
from hookinbox.cli._ports import check_port_free
from hookinbox.cli._types import Host, number

SERVERS = ("uvicorn", "granian")
FACTORY = "hookinbox.cli._asgi:app_from_environment"
"""What each server process imports and calls for its app (`--workers N` spawns them)."""


@click.command(short_help=short_help("serve"))
@app_argument(required=True)
@database_url_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    type=Host(),
    envvar="HOOKINBOX_HOST",
    show_envvar=True,
    help="Interface to listen on.",
)
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=number(ranges.PORT),
    envvar="HOOKINBOX_PORT",
    show_envvar=True,
    help="Port to listen on.",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=number(ranges.SERVER_PROCESSES),
    envvar="HOOKINBOX_WORKERS",
    show_envvar=True,
    help="HTTP server processes.",
)
@click.option(
    "--server",
    "server_name",
    type=click.Choice(SERVERS),
    default="uvicorn",
    show_default=True,
    envvar="HOOKINBOX_SERVER",
    show_envvar=True,
    help="The HTTP server: uvicorn (hookinbox[server]), or granian (hookinbox[granian]), "
    "which parses HTTP and serves sockets in Rust threads, outside Python's lock.",
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
    type=number(ranges.ACK_DEADLINE_OPTION),
    default=None,
    envvar=ACK_DEADLINE_ENV,
    show_envvar=True,
    metavar="SECONDS",
    help="Answer 503 to a delivery not stored within SECONDS (default: the inbox's, 3); "
    "0 turns the deadline off.",
)
@click.option(
    "--body-timeout",
    type=number(ranges.BODY_TIMEOUT),
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
@store_option_flags
def serve(
    app: str,
    database_url: str | None,
    host: str,
    port: int,
    workers: int,
    server_name: str,
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
    **store_options: object,
) -> None:
    """Receive webhooks for APP (module:attribute naming an Inbox) over HTTP.

    The schema is created or upgraded before the server starts listening. Unless --no-worker,
    a `hookinbox worker` process runs alongside and stops with the server. An inbox with
    Redis claims has neither: its handlers run in the request. With an admin token, the
    operator dashboard is served at /admin (docs/dashboard.md). Needs hookinbox[server].

    Exit codes: 0 stopped by SIGTERM or SIGINT; 1 the database is unavailable or the port is
    taken; 2 bad usage or configuration (APP, a missing extra).
    """
    require("hookinbox serve", "server")
    if server_name == "granian":
        require("hookinbox serve --server granian", "granian")
    worker_arguments = [
        app,
        "--concurrency", str(concurrency),
        "--lease-seconds", str(lease_seconds),
        "--grace-period", str(grace_period),
        "--log-level", log_level,
        "--log-format", log_format,
        "--parent-pid", str(os.getpid()),  # it stops by itself if this process is killed
    ]  # fmt: skip
    if not no_worker:
        check_worker_settings(worker_arguments)
    if admin_token:
        require("hookinbox serve --admin-token", "dashboard")
        dashboard_settings(admin_token)  # a short token or a bad threshold stops us here
    check_port_free(host, port, "hookinbox serve")

    import uvicorn

    from hookinbox._inbox import Inbox, check_body_limit, check_encryption
    from hookinbox.cli._asgi import overrides_from_environment
    from hookinbox.cli._loading import load_app
    from hookinbox.cli._logs import logging_config
    from hookinbox.cli._supervise import WorkerSupervisor
    from hookinbox.cli._target import explained
    from hookinbox.dashboard._token import ADMIN_TOKEN_ENV

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
    # The store options (--pool-size, ...) reach the server processes and the worker as the
    # variables their own flags read.
    for spec, value in zip_store_options(store_option_values(store_options)):
        os.environ[spec.variable] = str(value)
    # Where the HTTP processes wake the worker (only on SQLite: the inbox and the worker
    # decide, knowing the database), set before APP is imported: with --workers 1, uvicorn
    # serves in this process, with the inbox built by the import below.
    os.environ.pop(WAKE_SOCKET_ENV, None)
    wake_dir, wake_socket = (None, None) if no_worker else _wake_socket()
    if wake_socket is not None:
        os.environ[WAKE_SOCKET_ENV] = wake_socket
    try:
        inbox = load_app(app, overrides=overrides_from_environment())
        if isinstance(inbox, Inbox):
            with explained(inbox.settings.database_url):
                inbox.migrate()  # checks the app's handlers and sources first
                check_body_limit(inbox)  # a body limit the database cannot store: exit 2
                check_encryption(inbox)  # keys that cannot read what is stored: exit 2
        else:
            no_worker = True  # Redis claim mode: handlers run in the request; no schema, no queue
        inbox.close()
    except BaseException:
        if wake_dir is not None:
            shutil.rmtree(wake_dir, ignore_errors=True)
        raise
    if admin_token:
        os.environ[ADMIN_TOKEN_ENV] = admin_token
    supervisor = None
    if not no_worker:
        command = [sys.executable, "-m", "hookinbox", "worker", *worker_arguments]
        if wake_socket is not None:
            command += ["--wake-socket", wake_socket]
        supervisor = WorkerSupervisor(command, grace_period)
        supervisor.start()
    # uvicorn re-raises the signal that stopped it once it is done, to whatever handler was
    # installed before it ran; with the default one the process would die right there, before
    # the worker is drained. A handler that does nothing lets us shut down in order, exit 0.
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, lambda _signum, _frame: None)
    try:
        if server_name == "granian":
            from hookinbox.cli._granian import run_granian

            run_granian(FACTORY, host, port, workers, logging_config(log_level.upper(), log_format))
        else:
            uvicorn.run(
                FACTORY,
                factory=True,
                host=host,
                port=port,
                workers=workers,
                access_log=False,  # hookinbox logs one line per delivery itself
                log_config=logging_config(log_level.upper(), log_format),
                timeout_graceful_shutdown=10,
            )
    except SystemExit as stopped:  # uvicorn's own exit codes (3: startup failed) are not ours
        if stopped.code not in (0, None):
            raise HookinboxError(
                f"the server stopped at start-up on {host}:{port} (its log says why)"
            ) from None
    finally:
        if supervisor is not None:
            supervisor.stop()
        if own_metrics_dir is not None:
            flush_counts()  # the last second's counts, while their directory is there
            shutil.rmtree(own_metrics_dir, ignore_errors=True)
        if wake_dir is not None:
            shutil.rmtree(wake_dir, ignore_errors=True)


def check_worker_settings(arguments: list[str]) -> None:
    """Parse the worker's command line as its process will, variables included: it reads
    `HOOKINBOX_POLL_INTERVAL`, `HOOKINBOX_HEARTBEAT_INTERVAL`, ... that serve itself does not
    take. A bad one is refused here, in one line, exit 2; found by the worker, it was a
    worker that exited 2 and was restarted forever (or, for `nan`, one that spun)."""
    from hookinbox.cli._worker import worker

    worker.make_context("worker", list(arguments), parent=click.get_current_context().parent)


def zip_store_options(
    values: tuple[tuple[str, object], ...],
) -> list[tuple[StoreOptionFlag, object]]:
    flags = {spec.field: spec for spec in STORE_OPTION_FLAGS}
    return [(flags[name], value) for name, value in values]


def _wake_socket() -> tuple[str, str | None]:
    """A private directory (mode 0700) and the path of the worker's wake-up socket in it;
    None for the path when it cannot be bound (too long, not POSIX): the worker then polls.
    On PostgreSQL nothing binds or sends there (NOTIFY wakes the worker from any host)."""
    from hookinbox._processing._wakeup import usable_path

    directory = tempfile.mkdtemp(prefix="hookinbox-serve-")
    path = os.path.join(directory, "worker.sock")
    return directory, path if usable_path(path) else None
