"""`hookinbox simulate`: provider-faithful deliveries against any endpoint, then the check.

Exit codes: 0 every delivery was sent, every valid event acknowledged and (with --verify) the
exactly-once check holds; 1 it does not, or the target or the --verify database is
unreachable; 2 bad usage or a missing extra (the --verify URL's driver too). The --verify
database is read once before anything is sent.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

import click

from hookinbox._extras import require
from hookinbox.cli._commands import short_help

# The options are drawn from the simulator's own profiles and defaults, so the simulator (the
# [simulate] extra) is needed as soon as the command is: for its --help too.
require("hookinbox simulate", "simulate")

from rich.table import Table  # noqa: E402

from hookinbox.cli._plain import report_console  # noqa: E402
from hookinbox.cli._types import number  # noqa: E402
from hookinbox.simulate import (  # noqa: E402
    SimulationConfig,
    SimulationReport,
    Verification,
    simulate,
    verify,
    wait_until_drained,
)
from hookinbox.simulate._config import DRAIN_TIMEOUT, RANGES  # noqa: E402
from hookinbox.simulate._providers import PROFILES  # noqa: E402
from hookinbox.simulate._report import render_report  # noqa: E402
from hookinbox.simulate._verify import check_database  # noqa: E402

EXIT_CHECK_FAILED = 1
ENV = "HOOKINBOX_SIMULATE_"
DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in fields(SimulationConfig) if f.default is not MISSING
}


Decorator = Callable[[Callable[..., None]], Callable[..., None]]


def _option(name: str, help: str, *target: str, **kwargs: Any) -> Decorator:
    """A flag with its HOOKINBOX_SIMULATE_* variable, defaulting to SimulationConfig's value."""
    attribute = name.removeprefix("--").replace("-", "_")
    if attribute in RANGES and "type" not in kwargs:  # the range SimulationConfig checks
        kwargs["type"] = number(RANGES[attribute])
    if attribute in DEFAULTS and "default" not in kwargs:
        kwargs["default"] = DEFAULTS[attribute]
        kwargs.setdefault("show_default", DEFAULTS[attribute] is not None)
    return click.option(
        name,
        *target,  # the parameter's name, where it differs from the flag's
        envvar=ENV + attribute.upper(),
        show_envvar=True,
        help=help,
        **kwargs,
    )


def _share(name: str, help: str) -> Decorator:
    """A share of the events, from 0 to 1 (its range is in `RANGES` too)."""
    return _option(name, help)


def verification_table(verification: Verification) -> Table:
    table = Table(title="Exactly-once check", title_justify="left", show_header=False)
    table.add_column(style="dim")
    table.add_column(justify="right")

    def row(name: str, value: object, bad: bool = False) -> None:
        text = "-" if value is None else str(value)
        table.add_row(name, f"[red]{text}[/red]" if bad else text)

    row("events acknowledged", verification.expected)
    row("processed", verification.processed)
    row("duplicates absorbed", verification.duplicates_absorbed)
    row("effects expected", verification.effects_expected)
    row("effects found", verification.effects_found)
    row("lost", verification.lost, verification.lost > 0)
    row("doubled", verification.doubled, verification.doubled > 0)
    row("invalid accepted", verification.invalid_accepted, verification.invalid_accepted > 0)
    if verification.states_checked:
        row("final states wrong", verification.states_wrong, verification.states_wrong > 0)
    status = "[green]ok[/green]" if verification.ok else "[red]FAILED[/red]"
    table.add_row("result", status)
    return table


def incomplete(report: SimulationReport) -> str | None:
    parts = []
    if report.unacknowledged:
        parts.append(f"{report.unacknowledged} events never acknowledged 2xx")
    if report.not_sent:
        parts.append(f"{report.not_sent} deliveries not sent before --duration ended")
    return "incomplete: " + ", ".join(parts) if parts else None


def invalid_answered(report: SimulationReport) -> str | None:
    """A receiver failure the answers alone show: a forgery, a replay or a malformed body
    answered 2xx. It fails the run with or without --verify (docs/simulate.md)."""
    if not report.invalid_accepted:
        return None
    return (
        f"{report.invalid_accepted} invalid deliveries (forged, expired or malformed) answered "
        "2xx: the receiver accepted what it must refuse"
    )


@click.command("simulate", short_help=short_help("simulate"))
@_option(
    "--provider",
    "Whose deliveries to imitate.",
    type=click.Choice(list(PROFILES)),
    required=True,
)
@_option("--secret", "The signing secret the target expects.", required=True)
@_option("--target", "Endpoint URL, e.g. http://127.0.0.1:8000/webhooks/stripe.", required=True)
@_option("--events", "Valid events to deliver.")
@_option("--concurrency", "Deliveries in flight at once.")
@_option(
    "--rate", "First deliveries started per second [default: as fast as --concurrency allows]."
)
@_option("--seed", "Seed of the plan [default: drawn; the report names it].")
@_option("--duration", "Seconds after which nothing more is sent [default: until done].")
@_share("--duplicate-rate", "Share of events delivered 2-3 times (seed 000: 0.312%).")
@_share("--burst-rate", "Share of events whose first delivery is a burst of copies at once.")
@_option("--burst-size", "Copies in a burst.")
@_option(
    "--retry-compression", "Divide the provider's retry delays by this (Stripe's 5 s becomes 5 ms)."
)
@_share("--lost-response-rate", "Share of events whose first answer the sender drops.")
@_share("--out-of-order-rate", "Stripe: share of subscription chains sent update first.")
@_share("--forged-rate", "Extra deliveries signed with a wrong secret, per event.")
@_share("--expired-rate", "Extra deliveries with a 10-60 min old signature, per event.")
@_share("--malformed-rate", "Extra deliveries signed over a body that is not JSON, per event.")
@_option(
    "--timeout",
    "Seconds to wait for an answer [default: the provider's, e.g. Stripe 10, Shopify 5].",
)
@_option(
    "--verify",
    "Database URL of the receiver: check exactly-once after processing drained.",
    "verify_url",
    default=None,
)
@_option(
    "--effects-sql",
    "Query returning one row per applied effect, key first [default, stripe: the shop's].",
    default=None,
)
@_option(
    "--drain-timeout",
    "Seconds to wait for hookinbox to finish processing before checking.",
    type=number(DRAIN_TIMEOUT),
    default=60.0,
    show_default=True,
)
@_option("--json", "Print the report as JSON.", "as_json", is_flag=True, default=False)
def simulate_command(
    verify_url: str | None,
    effects_sql: str | None,
    drain_timeout: float,
    as_json: bool,
    **settings: Any,
) -> None:
    """Send realistic, signed webhook deliveries to --target, as PROVIDER would.

    Duplicates, concurrent bursts, retries on the provider's schedule (compressed in time),
    lost responses, out-of-order updates, and forged, expired and malformed deliveries; then a
    report, and with --verify the exactly-once check against the receiver's database.

    Exit codes: 0 every delivery sent, every valid one acknowledged, no invalid one answered
    2xx (and, with --verify, exactly-once held); 1 not so, or the target or the --verify
    database is unreachable (checked before anything is sent); 2 bad usage or a missing
    extra (hookinbox[simulate], or the --verify URL's driver).
    """
    config = SimulationConfig(**settings)
    if verify_url is not None:
        # Its driver and the database itself, now: nothing is sent for a check that fails.
        check_database(verify_url)
    stdout = report_console()
    stderr = report_console(err=True)
    report = simulate(config, console=stderr)
    verification = None
    drained = None
    if verify_url is not None:
        drained = wait_until_drained(verify_url, drain_timeout, since=report.started_at)
        verification = verify(report, verify_url, effects_sql=effects_sql)
    failures = [line for line in (incomplete(report), invalid_answered(report)) if line]
    if drained is False:
        failures.append(
            f"processing had not drained after {drain_timeout:g} s: a backlog drains at the "
            "worker's pace and deferred events retry after 5 s, 20 s, 80 s...; raise "
            "--drain-timeout"
        )
    if verification is not None:
        failures += [f"check failed: {problem}" for problem in verification.problems]
    if as_json:
        document = {
            "report": report.to_dict(),
            "verification": None if verification is None else verification.to_dict(),
            "drained": drained,
            "ok": not failures,
        }
        click.echo(json.dumps(document, indent=2, sort_keys=True))
    else:
        render_report(report, stdout)
        if verification is not None:
            stdout.print(verification_table(verification))
    for line in verification.notes if verification is not None else ():
        click.echo(f"note: {line}", err=True)
    for line in failures:
        click.echo(line, err=True)
    if failures:
        sys.exit(EXIT_CHECK_FAILED)
