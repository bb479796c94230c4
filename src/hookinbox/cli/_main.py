"""The `hookinbox` command: a click group that imports each command's module when it runs.

Exit codes (docs/cli.md): 0 success (also when the reader of stdout went away, `| head`);
1 the operation failed (database unavailable, a check breached, a busy port); 2 bad usage or
configuration (unknown APP, malformed URL, a missing extra). Errors are one line on stderr,
never a traceback.

`hookinbox --help` imports click and nothing heavy: the commands' modules, and through them
SQLAlchemy, uvicorn and rich, are imported only by the command that needs them.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from typing import Any

import click

from hookinbox._errors import ConfigurationError, HookinboxError
from hookinbox.cli._commands import COMMANDS
from hookinbox.cli._output import echo_untrusted

EXIT_FAILURE = 1
EXIT_USAGE = 2
DEBUG_ENV = "HOOKINBOX_DEBUG"
"""Set to 1 to see the traceback of an unexpected error instead of its one line."""


class LazyGroup(click.Group):
    """Commands named in `COMMANDS`, each imported on first use; errors as one line."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = entry.target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command), entry.target
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, with its "did you mean" hint (click draws it from registered commands;
        these are only named)."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from `COMMANDS`, without importing a single command."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, _shorten(COMMANDS[name].short_help, limit)) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConfigurationError as error:  # MissingExtra too: install the extra it names
            fail(str(error), EXIT_USAGE)
        except HookinboxError as error:  # StoreUnavailable, a busy port, ...
            fail(str(error), EXIT_FAILURE)
        except click.exceptions.NoArgsIsHelpError:
            raise  # `hookinbox events` alone: its help, as asked, not an error
        except click.UsageError as error:
            hint = f"; see `{error.ctx.command_path} --help`" if error.ctx else ""
            fail(f"{error.format_message().rstrip('.')}{hint}", EXIT_USAGE)
        except click.ClickException as error:  # e.g. an unknown event: the operation failed
            fail(error.format_message(), EXIT_FAILURE)
        except (click.exceptions.Exit, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except BrokenPipeError:
            # The reader went away (`| head`): it has what it read, and the work is done
            # (every command acts first, then prints). Exit 0, quietly: a script under
            # `set -o pipefail` must not fail for a `| head` (docs/cli.md, "Output").
            _discard_stdout()
            sys.exit(0)
        except Exception as error:  # a bug: one line, unless the traceback is asked for
            if os.environ.get(DEBUG_ENV):
                raise
            first_line = (str(error).strip().splitlines() or [""])[0]
            fail(
                f"unexpected {type(error).__name__}: {first_line} "
                f"(set {DEBUG_ENV}=1 for the traceback)",
                EXIT_FAILURE,
            )


def _discard_stdout() -> None:
    """Point stdout at /dev/null: the interpreter flushes it at exit, and what is left in its
    buffer would meet the closed pipe again (an "Exception ignored" line, exit 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's captured stdout)
        pass


def fail(message: str, code: int) -> None:
    echo_untrusted(f"error: {message}", err=True)
    sys.exit(code)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 3, 10)].rstrip() + "..."


@click.group(cls=LazyGroup)
@click.version_option(package_name="hookinbox")
def main() -> None:
    """hookinbox: verified, deduplicated, durable webhooks, processed exactly once.

    APP is module:attribute naming your Inbox (or set HOOKINBOX_APP). Shell completion:
    eval "$(_HOOKINBOX_COMPLETE=bash_source hookinbox)" (zsh_source, fish_source).
    """
