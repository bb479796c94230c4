"""The basic app with a 3 MiB body limit: more than a MariaDB server whose max_allowed_packet is
4 MiB can take in one statement (a body travels escaped, up to twice its size)."""

from __future__ import annotations

from tests.apps.basic import build

MAX_BODY_SIZE = 3 * 1024 * 1024

inbox = build(max_body_size=MAX_BODY_SIZE)
