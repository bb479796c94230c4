"""`hookinbox encryption`: rewrite stored bodies and headers under the key that encrypts now
(`rotate`), check that the keys read what is stored (`check`), make a key (`new-key`).

The keys come from `HOOKINBOX_ENCRYPTION_KEYS` (docs/encryption.md); no command prints one
except `new-key`, which makes it.
"""

from __future__ import annotations

import time
from collections import Counter

import click

from hookinbox import _ranges as ranges
from hookinbox.cli._commands import short_help
from hookinbox.cli._options import app_argument, database_url_option, json_option
from hookinbox.cli._output import emit_json, progress
from hookinbox.cli._types import number


@click.group(short_help=short_help("encryption"))
def encryption() -> None:
    """Encryption at rest of stored bodies and headers (HOOKINBOX_ENCRYPTION_KEYS)."""


@encryption.command("rotate")
@app_argument(required=False)
@database_url_option
@click.option("--dry-run", is_flag=True, help="Count events per key id; rewrite nothing.")
@click.option(
    "--batch-size",
    type=number(ranges.ROTATION_BATCH),
    default=500,
    show_default=True,
    help="Events read and rewritten per transaction.",
)
@click.option(
    "--pause",
    type=number(ranges.ROTATION_PAUSE),
    default=0.0,
    show_default=True,
    help="Seconds between batches, leaving the database to live traffic.",
)
@json_option
def rotate(
    app: str | None,
    database_url: str | None,
    dry_run: bool,
    batch_size: int,
    pause: float,
    as_json: bool,
) -> None:
    """Rewrite every stored body and headers not yet under the first key of
    HOOKINBOX_ENCRYPTION_KEYS (events stored in clear too), in batches, each its own
    transaction. Interrupted, it leaves every event readable (old key or new: keep both in
    the variable until a run ends) and a second run finishes the work.

    Prints the events read, rewritten, and per key id what was found (before the rewrite).

    Exit codes: 0 done (or --dry-run); 1 the database is unavailable; 2 bad usage or
    configuration (no keys, a malformed key, a stored value no key given decrypts).
    """  # fmt: skip
    from hookinbox._storage._encryption import RotationStep
    from hookinbox._storage._payload_codec import keyring
    from hookinbox.cli._target import opened

    ring = keyring()  # a malformed variable: one line before any I/O
    keys: Counter[str] = Counter()
    total = RotationStep(None)
    started = time.monotonic()
    with opened(app, database_url) as target, progress("rotating", None) as advance:
        after = 0
        while True:
            step = target.store.encryption.rotate_batch(after, batch_size, dry_run=dry_run)
            if step.last_id is None:
                break
            keys.update(step.keys)
            total.read += step.read
            total.rewritten += step.rewritten
            total.changed += step.changed
            advance(step.read)
            after = step.last_id
            if pause:
                time.sleep(pause)
    seconds = time.monotonic() - started
    current = ring.current if ring else None
    if as_json:
        emit_json({
            "dry_run": dry_run,
            "key": current,
            "events": total.read,
            "rewritten": total.rewritten,
            "changed_meanwhile": total.changed,
            "by_key": dict(sorted(keys.items())),
            "seconds": round(seconds, 3),
        })  # fmt: skip
        return
    found = ", ".join(f"{key}: {count}" for key, count in sorted(keys.items())) or "none"
    verb = "would rewrite" if dry_run else "rewrote"
    pending = sum(n for key, n in keys.items() if key != current)
    done = pending if dry_run else total.rewritten
    line = f"{total.read} event(s) read ({found}); {verb} {done} under key {current!r}"
    if current is None:  # --dry-run without keys: the counts alone
        line = f"{total.read} event(s) read ({found}); no key is set to rewrite them under"
    if total.changed:
        line += f"; {total.changed} changed meanwhile, left as they are"
    click.echo(f"{line} in {seconds:.1f} s")


@encryption.command("check")
@app_argument(required=False)
@database_url_option
def check(app: str | None, database_url: str | None) -> None:
    """Check that HOOKINBOX_ENCRYPTION_KEYS is well formed and decrypts the newest encrypted
    event, as `serve` and `worker` do when they start.

    Exit codes: 0 the keys read what is stored; 1 the database is unavailable; 2 they do not
    (or are malformed, or missing while events are stored encrypted).
    """  # fmt: skip
    from hookinbox._storage._payload_codec import keyring
    from hookinbox.cli._target import opened

    ring = keyring()
    with opened(app, database_url) as target:
        target.store.encryption.check_keys()
    click.echo(f"ok: encrypting with key {ring.current!r}" if ring else "ok: encryption is off")


@encryption.command("new-key")
@click.option("--id", "key_id", default="k1", show_default=True, help="The key's id.")
def new_key(key_id: str) -> None:
    """Print a new random AES-256 key as ID:BASE64, the form HOOKINBOX_ENCRYPTION_KEYS takes
    (put it first to encrypt with it; keep the old ones after it until a rotation ends)."""
    from hookinbox._storage._payload_codec import check_key_id
    from hookinbox._storage._payload_codec import new_key as make

    check_key_id(key_id)
    click.echo(f"{key_id}:{make()}")
