"""The CLI on a real terminal and in real pipes (docs/cli.md, "Output").

A table on a terminal of 80 columns (the size of a new terminal window) keeps every id, key
and status whole, so they can be copied into `events show` and `replay`: other columns wrap,
then are left out, and a table that still does not fit is printed as plain columns. A reader
that goes away (`| head`) ends the command quietly, exit 0. The terminal here is a pseudo-terminal
with the window size set on it, as a terminal emulator sets it; nothing is told by $COLUMNS.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from hookinbox.cli._output import Table, fit, wrap_words
from tests.cli.conftest import Shop, hookinbox, invoice
from tests.cli.terminal import run_on_a_terminal
from tests.processing.conftest import checkout, subscription_update
from tests.support.server import ROOT, hookinbox_command

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
BOX = set("│┃━─┏┓┗┛╭╮╰╯┡┩┳┻╇")
STRIPE_LIKE = "evt_1NG8Du2eZvKYlo2CF8Kj3Nj"
"""A Stripe event id's shape and length, less its last character."""


def on_a_terminal(args: Sequence[str], columns: int) -> str:
    """The command's output on a terminal `columns` wide, without colour codes or carriage
    returns; it must succeed."""
    output, code = run_on_a_terminal(args, columns=columns)
    assert code == 0, output
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output).replace("\r\n", "\n")


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


@SQLITE_ONLY
def test_80_columns_keep_ids_and_statuses_whole(shop: Shop) -> None:
    for number in range(3):
        shop.deliver({**checkout(number), "id": f"{STRIPE_LIKE}{number}"})
    shop.fail(f"{STRIPE_LIKE[4:]}x")  # evt_ + the same shape: a failed invoice, with an error
    shop.process()
    ids = [f"{STRIPE_LIKE}{n}" for n in range(3)] + [f"evt_{STRIPE_LIKE[4:]}x"]
    listing = ["events", "list", "--database-url", shop.db_url]

    narrow = on_a_terminal(listing, 80)
    roomy = on_a_terminal(listing, 120)

    for output, columns in ((narrow, 80), (roomy, 120)):
        assert set(output) & BOX, output  # drawn as a table, not printed plain
        assert widest(output) <= columns, output
        assert "…" not in output, output
        for event_id in ids:
            assert re.search(rf"│ {event_id} +│", output), (event_id, output)  # whole, one line
        assert re.search(r"│ failed +│", output) and re.search(r"│ processed +│", output), output
    # 80 columns leave out what does not fit, and say so; 120 show every column.
    assert "received" not in narrow.split("not shown")[0], narrow
    assert re.search(r"not shown, for want of width: .*received", narrow.replace("\n", " "))
    assert "--wide" in narrow
    assert "received" in roomy and "not shown" not in roomy, roomy
    assert "max_attempts" in roomy  # the failed event's outcome


def type_cells(output: str) -> list[str]:
    """The `type` column's text, line by line, in a drawn `events list` table."""
    rows = [re.split("[│┃]", line) for line in output.splitlines() if line.startswith(("│", "┃"))]
    header = next(cells for cells in rows if "type" in (c.strip() for c in cells))
    column = [c.strip() for c in header].index("type")
    return [cells[column].strip() for cells in rows if cells is not header]


@SQLITE_ONLY
@pytest.mark.parametrize("columns", [80, 100, 120])
def test_an_event_type_wraps_after_its_dots_never_mid_word(shop: Shop, columns: int) -> None:
    for number in range(2):
        shop.deliver(
            {**subscription_update(number, f"pi_{number}"), "id": f"{STRIPE_LIKE}{number}"}
        )
    shop.fail(f"{STRIPE_LIKE[4:]}x")  # with its error, in the outcome column
    event_type = "customer.subscription.updated"
    parts = ["customer.", "subscription.", "updated", "invoice.", "paid"]

    output = on_a_terminal(["events", "list", "--database-url", shop.db_url], columns)

    assert widest(output) <= columns, output
    cells = [cell for cell in type_cells(output) if cell]
    assert "".join(cells).count(event_type) == 2, output  # every piece shown, in order
    for cell in cells:  # each line of the column is whole pieces: never a word cut
        assert re.fullmatch("(?:" + "|".join(map(re.escape, parts)) + ")+", cell), (cell, output)


@SQLITE_ONLY
def test_an_id_wider_than_the_terminal_is_printed_whole(shop: Shop) -> None:
    long_id = "evt_" + "x" * 150
    shop.deliver({**checkout(1), "id": long_id})

    listed = on_a_terminal(["events", "list", "--database-url", shop.db_url], 80)
    wide = on_a_terminal(["events", "list", "--wide", "--database-url", shop.db_url], 200)

    for output in (listed, wide):  # plain columns: the terminal wraps the line, not hookinbox
        assert long_id in output, output
        assert not set(output) & BOX, output
    assert "received" in wide  # --wide: every column
    shown = on_a_terminal(["events", "show", "stripe", long_id, "--database-url", shop.db_url], 80)
    assert long_id in shown


@SQLITE_ONLY
def test_status_fits_80_columns_with_every_status(shop: Shop) -> None:
    shop.deliver(checkout(1))
    shop.fail(2)

    output = on_a_terminal(["status", "--database-url", shop.db_url], 80)

    assert widest(output) <= 80, output
    assert "…" not in output, output
    for status in ("pending", "processing", "deferred", "processed", "unhandled", "failed"):
        assert re.search(rf"│ {status} +│", output), (status, output)  # a row per status


def test_fitting_drops_columns_in_their_order_and_never_cuts_a_kept_one() -> None:
    table = Table(
        ["id", "type", "note", "count"],
        right=frozenset({"count"}),
        keep=frozenset({"id"}),
        drop=["count", "note"],
    )
    table.add_row("a" * 30, "checkout.session.completed", "a fairly long note to wrap", 12345)

    assert fit(table, 200) == {"id": 30, "type": 26, "note": 26, "count": 5}
    squeezed = fit(table, 70)  # every column, the wrapping ones narrower
    assert squeezed is not None and squeezed["id"] == 30 and squeezed["count"] == 5
    assert sum(squeezed.values()) + 3 * 4 + 1 == 70
    dropped = fit(table, 60)  # count left out first, the rest squeezed into the window
    assert dropped is not None and list(dropped) == ["id", "type", "note"]
    assert dropped["id"] == 30 and sum(dropped.values()) + 3 * 3 + 1 == 60
    assert fit(table, 50) == {"id": 30, "type": 13}  # then the note; the type wraps
    # ... after its dots only: its narrowest is its widest piece, `checkout.` or `completed`.
    assert fit(table, 30 + 9 + 7) == {"id": 30, "type": 9}
    assert fit(table, 30 + 8 + 7) is None
    assert wrap_words("checkout.session.completed", 13) == "checkout.\nsession.\ncompleted"
    assert wrap_words("checkout.session.completed", 17) == "checkout.session.\ncompleted"
    assert wrap_words("max_attempts: a long note", 14) == "max_attempts:\na long note"
    assert fit(table, 40) is None  # not even the kept id and the last column: plain lines


# -- pipes -----------------------------------------------------------------------------------


@SQLITE_ONLY
def test_a_closed_pipe_ends_quietly(shop: Shop, tmp_path: Path) -> None:
    big = {**invoice(1), "data": {"object": {"lines": ["x" * 1000] * 300}}}  # 300 kB of body
    shop.deliver(big)
    commands = [
        ["status"],
        ["events", "list"],
        ["events", "show", "stripe", "evt_1"],
    ]
    for args in commands:
        reader, writer = os.pipe()
        os.close(reader)  # the reader is gone before the first line (`| true`)
        process = subprocess.run(
            [*hookinbox_command(*args), "--database-url", shop.db_url],
            cwd=ROOT,
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
        os.close(writer)
        assert (process.returncode, process.stderr) == (0, ""), args
    # And as a shell runs it: head reads the first line and leaves mid-stream.
    show = " ".join(hookinbox_command("events", "show", "stripe", "evt_1"))
    pipeline = f"{show} --database-url '{shop.db_url}' 2>{tmp_path}/err | head -1"
    piped = subprocess.run(
        ["bash", "-o", "pipefail", "-c", pipeline],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert piped.stdout.strip(), piped
    assert piped.returncode == 0  # `set -o pipefail` scripts go on (docs/cli.md, "Output")
    assert (tmp_path / "err").read_text() == ""


def test_a_group_alone_shows_its_help() -> None:
    result = hookinbox("events")
    assert result.stderr.startswith("Usage: hookinbox events"), result.stderr
    assert "error:" not in result.stderr.lower()
    assert "list" in result.stderr and "show" in result.stderr
    assert result.returncode == 2
