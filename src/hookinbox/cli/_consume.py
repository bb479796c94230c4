"""`hookinbox consume APP --source S --rabbitmq URL --queue Q` (or `--jetstream URL --stream ST
--consumer C`): a broker queue feeding one of APP's `BrokerSource`s, until SIGTERM.

Every option is checked while the command line is parsed, before APP is imported or a broker
is asked: one line and exit 2. SIGTERM or SIGINT stops taking messages; those in flight are
stored and settled with the broker before the command exits 0.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from hookinbox import _ranges as ranges
from hookinbox._extras import require
from hookinbox.cli._commands import short_help
from hookinbox.cli._options import (
    app_argument,
    database_url_option,
    log_format_option,
    log_level_option,
    store_option_flags,
    store_option_values,
)
from hookinbox.cli._types import number

if TYPE_CHECKING:
    from hookinbox.brokers._consumer import Consumer


class BrokerURL(click.types.StringParamType):
    """A broker's URL, its scheme checked at parse time (click names the option and its
    variable); the error shows the scheme only, never a password."""

    name = "URL"

    def __init__(self, broker: str, schemes: tuple[str, ...]) -> None:
        self.broker = broker
        self.schemes = schemes

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from hookinbox._errors import ConfigurationError
        from hookinbox.brokers._consumer import check_url

        try:
            check_url(value, self.broker, self.schemes)
        except ConfigurationError as error:
            self.fail(str(error), param, ctx)
        return str(value)


F = TypeVar("F", bound=Callable[..., Any])


def _name_option(
    flag: str, variable: str, text: str, *, required: bool = False
) -> Callable[[F], F]:
    """A name the broker (or APP) looks up: any text here, refused where it is looked up."""
    return click.option(flag, required=required, envvar=variable, show_envvar=True, help=text)


def _url_option(flag: str, variable: str, url: BrokerURL, text: str) -> Callable[[F], F]:
    return click.option(flag, type=url, envvar=variable, show_envvar=True, metavar="URL", help=text)


@click.command(short_help=short_help("consume"))
@app_argument(required=True)
@_name_option(
    "--source",
    "HOOKINBOX_CONSUME_SOURCE",
    "The name of APP's BrokerSource the messages are stored as.",
    required=True,
)
@_url_option(
    "--rabbitmq",
    "HOOKINBOX_RABBITMQ_URL",
    BrokerURL("RabbitMQ", ("amqp://", "amqps://")),
    "Consume a RabbitMQ queue (amqp://user:password@host:5672/vhost).",
)
@_name_option("--queue", "HOOKINBOX_RABBITMQ_QUEUE", "The RabbitMQ queue (it must exist).")
@_url_option(
    "--jetstream",
    "HOOKINBOX_NATS_URL",
    BrokerURL("NATS", ("nats://", "tls://")),
    "Consume a NATS JetStream pull consumer (nats://host:4222).",
)
@_name_option("--stream", "HOOKINBOX_JETSTREAM_STREAM", "The stream.")
@_name_option(
    "--consumer",
    "HOOKINBOX_JETSTREAM_CONSUMER",
    "The stream's durable pull consumer (it must exist).",
)
@_name_option(
    "--dead-letter-subject",
    "HOOKINBOX_JETSTREAM_DEAD_LETTER_SUBJECT",
    "Where poison messages are published before they are terminated (JetStream).",
)
@click.option(
    "--prefetch",
    type=number(ranges.BROKER_PREFETCH),
    default=16,
    show_default=True,
    envvar="HOOKINBOX_BROKER_PREFETCH",
    show_envvar=True,
    help="Messages in flight at most.",
)
@click.option(
    "--retry-delay",
    type=number(ranges.BROKER_RETRY_DELAY),
    default=5.0,
    show_default=True,
    envvar="HOOKINBOX_BROKER_RETRY_DELAY",
    show_envvar=True,
    help="Seconds before a message the database could not take is redelivered.",
)
@database_url_option
@log_level_option
@log_format_option
@store_option_flags
def consume(
    app: str,
    source: str,
    rabbitmq: str | None,
    queue: str | None,
    jetstream: str | None,
    stream: str | None,
    consumer: str | None,
    dead_letter_subject: str | None,
    prefetch: int,
    retry_delay: float,
    database_url: str | None,
    log_level: str,
    log_format: str,
    **store_options: object,
) -> None:
    """Store the messages of a RabbitMQ queue or a JetStream consumer as events of APP's
    BrokerSource --source, acking each only after it is stored; until SIGTERM or SIGINT.

    A message with no key, not JSON where its key or type is read from it, or larger than
    the inbox's max body size goes to the broker's dead-letter route (RabbitMQ: the queue's
    dead-letter exchange; JetStream: --dead-letter-subject, then terminated). One the
    database cannot take now goes back to the broker after --retry-delay.

    Exit codes: 0 stopped, the messages in flight settled; 1 the broker or the database is
    unavailable; 2 bad usage or configuration (no such queue, stream or consumer too).
    """
    _check_broker_options(rabbitmq, queue, jetstream, stream, consumer, dead_letter_subject)
    if rabbitmq:
        require("hookinbox consume --rabbitmq", "rabbitmq")
    else:
        require("hookinbox consume --jetstream", "nats")
    from hookinbox._settings import Overrides
    from hookinbox.cli._loading import load_inbox
    from hookinbox.cli._logs import configure_logging
    from hookinbox.cli._target import explained
    from hookinbox.cli._worker import check_keys

    configure_logging(log_level, log_format)
    inbox = load_inbox(
        app, overrides=Overrides(database_url, store_options=store_option_values(store_options))
    )
    built: Consumer
    if rabbitmq and queue:
        from hookinbox.brokers import RabbitMQConsumer

        built = RabbitMQConsumer(
            inbox, source, url=rabbitmq, queue=queue, prefetch=prefetch, retry_delay=retry_delay
        )
    else:
        from hookinbox.brokers import JetStreamConsumer

        assert jetstream and stream and consumer  # _check_broker_options
        built = JetStreamConsumer(
            inbox,
            source,
            url=jetstream,
            stream=stream,
            consumer=consumer,
            dead_letter_subject=dead_letter_subject,
            prefetch=prefetch,
            retry_delay=retry_delay,
        )
    check_keys(inbox)  # as serve and worker: keys that could not write what is stored, exit 2
    try:
        with explained(inbox.settings.database_url):
            asyncio.run(run_until_signalled(built))
    finally:
        inbox.close()


def _check_broker_options(
    rabbitmq: str | None,
    queue: str | None,
    jetstream: str | None,
    stream: str | None,
    consumer: str | None,
    dead_letter_subject: str | None,
) -> None:
    """One broker, with its options: else a usage error naming what is missing or extra."""
    if bool(rabbitmq) == bool(jetstream):
        raise click.UsageError("give one broker: --rabbitmq URL or --jetstream URL")
    if rabbitmq:
        extra = [
            n
            for n, v in (
                ("--stream", stream),
                ("--consumer", consumer),
                ("--dead-letter-subject", dead_letter_subject),
            )
            if v
        ]
        if extra:
            raise click.UsageError(f"{', '.join(extra)} apply to --jetstream, not --rabbitmq")
        if not queue:
            raise click.UsageError("--rabbitmq needs --queue")
        return
    if queue:
        raise click.UsageError("--queue applies to --rabbitmq, not --jetstream")
    if not stream or not consumer:
        raise click.UsageError("--jetstream needs --stream and --consumer")


async def run_until_signalled(consumer: Consumer) -> None:
    """`consumer.run()`, stopped by SIGTERM or SIGINT (the messages in flight settled)."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, consumer.stop)
    try:
        await consumer.run()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
