"""`hookinbox demo`: one command that shows the whole product working, and proves it."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import click

from hookinbox._extras import require
from hookinbox._ranges import DAY, seconds, whole
from hookinbox.cli._commands import short_help
from hookinbox.cli._options import (
    deprecated_app_option,
    from_command_line,
    json_option,
    resolve_app,
)

# The demo runs the simulator against `hookinbox serve`: both extras, checked before its
# options (which name the example shop) are even shown.
require("hookinbox demo", "simulate", "server")

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from hookinbox._demo import DEFAULT_APP, DemoResult, run_demo  # noqa: E402
from hookinbox.cli._plain import report_console  # noqa: E402
from hookinbox.cli._simulate import incomplete, verification_table  # noqa: E402
from hookinbox.cli._types import number  # noqa: E402
from hookinbox.simulate._config import RANGES  # noqa: E402
from hookinbox.simulate._report import render_report  # noqa: E402

EXIT_NOT_EXACTLY_ONCE = 1
DEMO_EVENTS = whole(10, 100_000)
DEMO_DRAIN_TIMEOUT = seconds(1, DAY)

INTRO = (
    "A shop receives Stripe webhooks. The simulator below plays Stripe, faithfully unreliable: "
    "[bold]duplicates[/bold] (0.312 % of events, as measured in production), [bold]bursts[/bold] "
    "of the same event at once, [bold]lost responses[/bold] and retries on Stripe's schedule "
    "(compressed in time), subscription [bold]updates before their checkout[/bold], and "
    "[bold]forged[/bold], expired and malformed deliveries. hookinbox must apply every real "
    "event exactly once, and the shop must send one receipt e-mail per order, through its outbox."
)


@click.command(short_help=short_help("demo"))
@click.argument("app", required=False, envvar="HOOKINBOX_DEMO_APP")
@deprecated_app_option
@click.option(
    "--events",
    default=1500,
    show_default=True,
    type=number(DEMO_EVENTS),
    envvar="HOOKINBOX_DEMO_EVENTS",
    show_envvar=True,
    help="Valid events to send.",
)
@click.option(
    "--database-url",
    envvar="HOOKINBOX_DEMO_DATABASE_URL",
    show_envvar=True,
    help="Run on this database instead of a temporary SQLite file.",
)
@click.option("--seed", type=number(RANGES["seed"]), help="Seed of the simulated traffic.")
@click.option(
    "--drain-timeout",
    default=120.0,
    show_default=True,
    type=number(DEMO_DRAIN_TIMEOUT),
    help="Seconds to wait for the worker and the relay to finish.",
)
@click.option("--keep", is_flag=True, help="Keep the temporary directory (database, server log).")
@json_option
def demo(
    app: str | None,
    app_option: str | None,
    events: int,
    database_url: str | None,
    seed: int | None,
    drain_timeout: float,
    keep: bool,
    as_json: bool,
) -> None:
    """Run the example shop on a throwaway database, send it a storm, check exactly-once.

    APP is the shop to run (module:attribute; $HOOKINBOX_DEMO_APP), by default the example
    shop, hookinbox.examples.shop:inbox.

    Exits 0 only if every acknowledged event was applied exactly once, nothing forged got in,
    and every order got exactly one receipt.

    Exit codes: 0 exactly-once held; 1 it did not, or the shop did not start; 2 bad usage or a
    missing extra (hookinbox[simulate,server]).
    """  # fmt: skip
    app = resolve_app(app, app_option, explicit=from_command_line("app")) or DEFAULT_APP
    out = report_console()
    progress = report_console(err=True)
    if not as_json:
        out.rule("[bold]hookinbox demo[/bold]")
        out.print(INTRO)
        out.print()
    workdir = Path(tempfile.mkdtemp(prefix="hookinbox-demo-"))
    try:
        result = run_demo(
            console=progress,
            events=events,
            app=app,
            database_url=database_url,
            workdir=workdir,
            seed=seed,
            drain_timeout=drain_timeout,
        )
    except RuntimeError as error:
        raise click.ClickException(f"{error} (server log kept in {workdir})") from error
    if as_json:
        click.echo(json.dumps(to_dict(result), indent=2, sort_keys=True, default=str))
    else:
        show(result, out)
    if keep or not result.ok:
        click.echo(f"database and server log: {workdir}", err=True)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    if not result.ok:
        sys.exit(EXIT_NOT_EXACTLY_ONCE)


def show(result: DemoResult, out: Console) -> None:
    render_report(result.simulation, out)
    out.print(verification_table(result.verification))
    figures = result.status
    summary = Table(title="The inbox now (hookinbox status)", title_justify="left",
                    show_header=False)  # fmt: skip
    summary.add_column(style="dim")
    summary.add_column(justify="right")
    by_status: dict[str, int] = {}
    for (_source, state), count in figures.counts.items():
        by_status[state] = by_status.get(state, 0) + count
    summary.add_row("events", ", ".join(f"{n} {s}" for s, n in sorted(by_status.items())))
    ratio = figures.duplicates.get("all")
    if ratio is not None:
        summary.add_row("duplicate deliveries", f"{ratio.duplicates} of {ratio.deliveries} "
                        f"({ratio.ratio:.2%})")  # fmt: skip
    summary.add_row("receipts e-mailed", f"{result.receipts_sent} for {result.receipts_expected} "
                    f"orders ({result.receipt_requests} requests by the relay)")  # fmt: skip
    out.print(summary)
    for line in result.verification.notes:
        out.print(f"[dim]note: {line}[/dim]")
    problems = [*result.verification.problems, *result.problems]
    gap = incomplete(result.simulation)
    if gap:
        problems.append(gap)
    if result.ok:
        out.print("[bold green]exactly-once held[/bold green]: every acknowledged event applied "
                  "once, nothing forged stored, one receipt per order.")  # fmt: skip
    else:
        for problem in problems:
            out.print(f"[bold red]FAILED[/bold red] {problem}")


def to_dict(result: DemoResult) -> dict[str, object]:
    return {
        "ok": result.ok,
        "report": result.simulation.to_dict(),
        "verification": result.verification.to_dict(),
        "receipts": {
            "expected": result.receipts_expected,
            "sent": result.receipts_sent,
            "requests": result.receipt_requests,
        },
        "drained": result.drained,
        "problems": result.problems,
    }
