"""`python manage.py hookinbox_worker`: the worker of settings.HOOKINBOX_INBOX, in Django."""

from __future__ import annotations

import os
from argparse import ArgumentParser, ArgumentTypeError
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from hookinbox import ConfigurationError, Inbox, WorkerOptions
from hookinbox import _ranges as ranges
from hookinbox._ranges import Range
from hookinbox.django._inbox import configured_inbox

# (flag, range, default, help): each defaults to HOOKINBOX_<FLAG>, as `hookinbox worker` does,
# and takes the range `hookinbox worker`'s option takes (`hookinbox._ranges`).
_NUMBERS: tuple[tuple[str, Range, str, str], ...] = (
    ("concurrency", ranges.CONCURRENCY, "4", "Events processed at once (threads)."),
    ("relay-concurrency", ranges.CONCURRENCY, "4", "Outbox messages delivered at once (threads)."),
    (
        "lease-seconds",
        ranges.LEASE_SECONDS,
        "60",
        "How soon an event held by a killed worker is retried.",
    ),
    (
        "grace-period",
        ranges.GRACE_PERIOD,
        "30",
        "On SIGTERM, seconds to let attempts in flight finish.",
    ),
    (
        "poll-interval",
        ranges.POLL_INTERVAL,
        "",
        "Seconds between checks when nothing wakes the worker "
        "(unset: 0.05 on SQLite and MariaDB, 1 on PostgreSQL).",
    ),
    ("metrics-port", ranges.METRICS_PORT, "", "Serve Prometheus metrics on this port."),
)


LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
"""`hookinbox worker`'s `--log-level` and `--log-format` choices."""


def _variable(flag: str) -> str:
    return "HOOKINBOX_" + flag.replace("-", "_").upper()


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    """argparse's type for a choice: argparse checks `choices` on the command line only, not
    on a default (a variable's value), which goes through `type`."""

    def convert(text: str) -> str:
        if text not in choices:
            raise ArgumentTypeError(f"{text!r} is not one of {', '.join(choices)}")
        return text

    return convert


def _within(limits: Range) -> Callable[[str], int | float]:
    """argparse's type for a number in `limits`: `nan`, `inf` and garbage are refused (argparse
    says which flag, and exits 2), whether given on the command line or by the variable."""

    def convert(text: str) -> int | float:
        try:
            value: int | float = int(text) if limits.whole else float(text)
        except ValueError:
            raise ArgumentTypeError(f"{text!r} is not a number") from None
        if value not in limits:
            raise ArgumentTypeError(f"{text!r} is not {limits.describe()}")
        return value

    return convert


class Command(BaseCommand):
    help = (
        "Process the stored events of settings.HOOKINBOX_INBOX, and deliver its outbox "
        "messages, until SIGTERM or SIGINT. On SIGTERM it stops leasing and lets the attempts "
        "in flight finish within --grace-period, then exits 0; if some are still running it "
        "exits 1 at once and they roll back."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        for flag, limits, default, text in _NUMBERS:
            # A string default goes through `type` as a command-line value would: a bad
            # variable is refused by argparse, naming the flag, not raised from here.
            value = os.environ.get(_variable(flag)) or default or None
            parser.add_argument(
                f"--{flag}",
                type=_within(limits),
                default=value,
                help=f"{text} [{_variable(flag)}" + (f", default {default}]" if default else "]"),
            )
        parser.add_argument(
            "--no-relay",
            action="store_true",
            default=os.environ.get("HOOKINBOX_NO_RELAY", "") not in ("", "0", "false"),
            help="Do not deliver outbox messages [HOOKINBOX_NO_RELAY].",
        )
        parser.add_argument(
            "--log-level",
            type=_one_of(LOG_LEVELS),
            choices=LOG_LEVELS,
            default=os.environ.get("HOOKINBOX_LOG_LEVEL") or "info",
            help="Of hookinbox's lines on stderr, unless LOGGING handles them "
            "[HOOKINBOX_LOG_LEVEL, default info].",
        )
        parser.add_argument(
            "--log-format",
            type=_one_of(LOG_FORMATS),
            choices=LOG_FORMATS,
            default=os.environ.get("HOOKINBOX_LOG_FORMAT") or "text",
            help="json: one JSON object per line [HOOKINBOX_LOG_FORMAT, default text].",
        )
        parser.add_argument(
            "--until-idle",
            action="store_true",
            help="Process what is due now, then exit (cron jobs, tests); retries due later wait.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        inbox = configured_inbox()
        if not isinstance(inbox, Inbox):
            raise CommandError(f"{inbox!r} keeps no queue: its handlers run in the request")
        try:
            self._run(inbox, options)
        except ConfigurationError as error:
            # Settings hookinbox cannot run on (a database not migrated, a MariaDB connection
            # in REPEATABLE READ): one line and exit 2, as `hookinbox worker` says them.
            raise CommandError(str(error), returncode=2) from error

    def _run(self, inbox: Inbox, options: dict[str, Any]) -> None:
        from hookinbox.cli._logs import log_to_stderr_unless_handled
        from hookinbox.cli._worker import run_until_stopped  # click: only for this command

        # On stderr as `hookinbox worker` logs, unless the project's LOGGING routes
        # hookinbox's records already (its own handlers and levels win).
        log_to_stderr_unless_handled(options["log_level"], options["log_format"])

        if options["until_idle"]:
            attempts = inbox.process_due()
            self.stdout.write(f"{attempts} attempt(s) run; nothing else is due")
            inbox.close()
            return
        worker_options = WorkerOptions(
            concurrency=options["concurrency"],
            relay_concurrency=options["relay_concurrency"],
            lease_seconds=options["lease_seconds"],
            grace_period=options["grace_period"],
            poll_interval=options["poll_interval"],
        )
        worker = inbox.worker(worker_options, relay=not options["no_relay"])
        run_until_stopped(inbox, worker, options["metrics_port"])
