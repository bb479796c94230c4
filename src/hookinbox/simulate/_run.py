"""A whole run: plan, check the target answers, send with a live progress bar, report."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import urlsplit

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from hookinbox._errors import HookinboxError
from hookinbox.simulate._config import SimulationConfig
from hookinbox.simulate._plan import build_plan
from hookinbox.simulate._report import SimulationReport, build_report
from hookinbox.simulate._sender import DeliveryResult, Sender
from hookinbox.simulate._signing import Signer, forger

PREFLIGHT_TIMEOUT = 5.0


class TargetUnreachable(HookinboxError):
    """The target does not accept connections."""


async def check_reachable(target: str, timeout: float = PREFLIGHT_TIMEOUT) -> None:
    """One TCP connection before the run: a typo in the URL is one line, not N retries."""
    parts = urlsplit(target)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, port), timeout)
    except (OSError, TimeoutError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else "timed out"
        raise TargetUnreachable(f"cannot reach {target}: {reason}") from error
    writer.close()


class LiveProgress:
    """The progress bar: deliveries answered of those due so far, answers by class."""

    def __init__(self, total: int, *, enabled: bool, console: Console) -> None:
        self.answers: Counter[str] = Counter()
        self.progress = Progress(
            TextColumn("[bold]simulate[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,  # the report replaces it
            disable=not enabled,
        )
        self.task = self.progress.add_task("", total=total)

    def result(self, result: DeliveryResult) -> None:
        status = result.status
        self.answers[f"{status // 100}xx" if status is not None else result.failure or "?"] += 1
        description = " · ".join(f"{name} {n}" for name, n in sorted(self.answers.items()))
        self.progress.update(self.task, advance=1, description=description)

    def grow(self, count: int) -> None:
        total = self.progress.tasks[0].total or 0
        self.progress.update(self.task, total=total + count)


async def run_simulation(
    config: SimulationConfig,
    *,
    progress: bool = True,
    console: Console | None = None,
    on_result: Callable[[DeliveryResult], None] | None = None,
) -> SimulationReport:
    """Send the simulated deliveries of `config` and report what happened.

    `on_result` sees each answer as it arrives (the soak bench and the reliability tests
    time them). Raises `TargetUnreachable` when the target accepts no connection at all; any
    answer, including errors and timeouts during the run, is part of the report instead.
    """
    seed = config.seed if config.seed is not None else random.SystemRandom().randrange(2**32)
    plan = build_plan(config, seed=seed, now=time.time())
    await check_reachable(config.target)
    started_at = datetime.now(UTC)
    console = console or Console(stderr=True)
    live = LiveProgress(
        sum(d.copies for d in plan.deliveries),
        enabled=progress and console.is_terminal,  # a log file gets the report, not frames
        console=console,
    )
    sender = Sender(
        config,
        plan,
        Signer(config.provider, config.secret),
        forger(config.provider, random.Random(seed)),
        on_result=live.result if on_result is None else _both(live.result, on_result),
        on_scheduled=live.grow,
    )
    with live.progress:
        outcome = await sender.run()
    return build_report(
        plan,
        outcome,
        provider=config.provider,
        target=config.target,
        settings={**config.as_dict(), "seed": seed},
        started_at=started_at,
    )


def _both(
    first: Callable[[DeliveryResult], None], second: Callable[[DeliveryResult], None]
) -> Callable[[DeliveryResult], None]:
    def call(result: DeliveryResult) -> None:
        first(result)
        second(result)

    return call


def simulate(
    config: SimulationConfig, *, progress: bool = True, console: Console | None = None
) -> SimulationReport:
    """`run_simulation` for callers without an event loop."""
    return asyncio.run(run_simulation(config, progress=progress, console=console))
