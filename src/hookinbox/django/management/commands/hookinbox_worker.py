"""`python manage.py hookinbox_worker`: the worker of settings.HOOKINBOX_INBOX, in Django."""

from __future__ import annotations

import os
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from hookinbox.django._inbox import configured_inbox
from hookinbox.processing import WorkerOptions


def _env(name: str, default: str) -> str:
    return os.environ.get(f"HOOKINBOX_{name}", default)


class Command(BaseCommand):
    help = (
        "Process the stored events of settings.HOOKINBOX_INBOX, and deliver its outbox "
        "messages, until SIGTERM or SIGINT. On SIGTERM it stops leasing and lets the attempts "
        "in flight finish within --grace-period, then exits 0; if some are still running it "
        "exits 1 at once and they roll back. Each option defaults to its HOOKINBOX_* variable."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--concurrency",
            type=int,
            default=int(_env("CONCURRENCY", "4")),
            help="Events processed at once (threads) [HOOKINBOX_CONCURRENCY, default 4].",
        )
        parser.add_argument(
            "--relay-concurrency",
            type=int,
            default=int(_env("RELAY_CONCURRENCY", "4")),
            help="Outbox messages delivered at once [HOOKINBOX_RELAY_CONCURRENCY, default 4].",
        )
        parser.add_argument(
            "--lease-seconds",
            type=float,
            default=float(_env("LEASE_SECONDS", "60")),
            help="How soon an event held by a killed worker is retried "
            "[HOOKINBOX_LEASE_SECONDS, default 60].",
        )
        parser.add_argument(
            "--grace-period",
            type=float,
            default=float(_env("GRACE_PERIOD", "30")),
            help="On SIGTERM, seconds to let attempts in flight finish "
            "[HOOKINBOX_GRACE_PERIOD, default 30].",
        )
        parser.add_argument(
            "--poll-interval",
            type=float,
            default=float(_env("POLL_INTERVAL", "0")) or None,
            help="Seconds between checks when nothing wakes the worker "
            "[HOOKINBOX_POLL_INTERVAL, default 0.05 SQLite, 1 PostgreSQL].",
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=int(_env("METRICS_PORT", "0")) or None,
            help="Serve Prometheus metrics on this port [HOOKINBOX_METRICS_PORT].",
        )
        parser.add_argument(
            "--no-relay",
            action="store_true",
            default=_env("NO_RELAY", "") not in ("", "0", "false"),
            help="Do not deliver outbox messages [HOOKINBOX_NO_RELAY].",
        )
        parser.add_argument(
            "--until-idle",
            action="store_true",
            help="Process what is due now, then exit (cron jobs, tests); retries due later wait.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from hookinbox.cli._main import run_until_stopped  # click, rich: only for this command

        inbox = configured_inbox()
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
