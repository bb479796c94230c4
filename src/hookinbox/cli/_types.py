"""The click types of every option that takes a number or a host: checked while the command
line is parsed, so a bad value is one `error:` line and exit 2 before the command runs.

Only click and the leaf `hookinbox._ranges` are imported: `--help` shows the ranges without
loading storage. A numeric option takes its range from `hookinbox._ranges`, the table the
Python constructors check as well (tests/test_setting_ranges.py walks every option).
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any

import click

from hookinbox._ranges import Range


class BoundedFloat(click.FloatRange):
    """A finite number within `limits`. click's `FloatRange` lets `nan` through (every
    comparison with it is false): a `nan` lease or poll interval started a worker that did
    nothing, or spun."""

    name = "number"  # "'abc' is not a valid number."; the range is in --help beside it

    def __init__(self, limits: Range) -> None:
        assert not limits.whole, limits
        super().__init__(
            limits.low, limits.high, min_open=limits.low_open, max_open=limits.high_open
        )
        self.limits = limits

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number} is not in the range {self._describe_range()}.", param, ctx)
        return number


class BoundedInt(click.IntRange):
    """A whole number within `limits` (both ends given: no option takes any int at all)."""

    name = "integer"

    def __init__(self, limits: Range) -> None:
        assert limits.whole, limits
        super().__init__(int(limits.low), int(limits.high))
        self.limits = limits


def number(limits: Range) -> BoundedInt | BoundedFloat:
    """The click type of an option taking a number in `limits`."""
    return BoundedInt(limits) if limits.whole else BoundedFloat(limits)


_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


class Host(click.types.StringParamType):
    """An interface to listen on: an IP address (`127.0.0.1`, `::`, `0.0.0.0`) or a host
    name as DNS spells one (`localhost`). Anything else was handed to the socket and came
    back as exit 1, "Name or service not known", as if the machine had failed."""

    name = "host"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = super().convert(value, param, ctx)
        try:
            ipaddress.ip_address(text)
        except ValueError:
            if not is_host_name(text):
                self.fail(
                    f"{text!r} is not an IP address or a host name (e.g. 127.0.0.1, ::1, "
                    "0.0.0.0, localhost)",
                    param,
                    ctx,
                )
        return text


def is_host_name(text: str) -> bool:
    """A DNS name (RFC 1123): dot-separated labels of letters, digits and inner hyphens, at
    most 253 characters; not all digits at the end (`1.2.3.4.5` is no address)."""
    labels = text.removesuffix(".").split(".")
    if not text or len(text) > 253 or labels[-1].isdigit():
        return False
    return all(_LABEL.fullmatch(label) for label in labels)
