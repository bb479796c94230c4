"""Where each command lives, and the one line `hookinbox --help` shows for it.

The group imports a command's module only when that command runs (or its own `--help` is
asked for), so `hookinbox --help` must know each command's short help without importing it:
it is written here, and each command passes the same line as its `short_help` (a test checks).
"""

from __future__ import annotations

from typing import NamedTuple


class Entry(NamedTuple):
    target: str
    """`module:attribute` of the click command."""
    short_help: str


COMMANDS: dict[str, Entry] = {
    "serve": Entry(
        "hookinbox.cli._serve:serve",
        "Receive APP's webhooks over HTTP, and process them.",
    ),
    "worker": Entry(
        "hookinbox.cli._worker:worker",
        "Process APP's stored events and deliver its outbox.",
    ),
    "relay": Entry(
        "hookinbox.cli._worker:relay",
        "Deliver APP's outbox messages only.",
    ),
    "consume": Entry(
        "hookinbox.cli._consume:consume",
        "Store a RabbitMQ queue's or JetStream consumer's messages.",
    ),
    "migrate": Entry(
        "hookinbox.cli._migrate:migrate",
        "Create or upgrade hookinbox's tables.",
    ),
    "status": Entry(
        "hookinbox.cli._status:status",
        "Counts, duplicate ratio, backlog; --check for probes.",
    ),
    "events": Entry(
        "hookinbox.cli._events:events",
        "Find and read stored events.",
    ),
    "replay": Entry(
        "hookinbox.cli._replay:replay",
        "Put events back to pending, to run them again.",
    ),
    "pause": Entry(
        "hookinbox.cli._pause:pause",
        "Stop processing a source's events; keep storing them.",
    ),
    "resume": Entry(
        "hookinbox.cli._pause:resume",
        "Process a paused source's events again.",
    ),
    "expunge": Entry(
        "hookinbox.cli._expunge:expunge",
        "Erase events' bodies and headers; keep the key and the log.",
    ),
    "prune": Entry(
        "hookinbox.cli._prune:prune",
        "Delete done events older than the retention.",
    ),
    "reconcile": Entry(
        "hookinbox.cli._reconcile:reconcile",
        "Store the events a provider's API lists that never arrived.",
    ),
    "trust": Entry(
        "hookinbox.cli._trust:trust",
        "Believe a source's first handshake for a while (Asana).",
    ),
    "encryption": Entry(
        "hookinbox.cli._encryption:encryption",
        "Encrypt stored bodies under the newest key; check keys.",
    ),
    "dashboard": Entry(
        "hookinbox.cli._dashboard:dashboard",
        "Serve the operator dashboard on its own.",
    ),
    "simulate": Entry(
        "hookinbox.cli._simulate:simulate_command",
        "Send provider-faithful deliveries to an endpoint.",
    ),
    "demo": Entry(
        "hookinbox.cli._demo:demo",
        "Run the example shop under a storm, check exactly-once.",
    ),
}


def short_help(name: str) -> str:
    return COMMANDS[name].short_help
