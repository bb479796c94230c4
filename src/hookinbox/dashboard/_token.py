"""The admin token's variable and strength check: what `hookinbox serve` needs to decide
whether the dashboard is on, without importing the dashboard's web stack."""

from __future__ import annotations

import math
from collections import Counter
from itertools import pairwise

from hookinbox._errors import ConfigurationError

ADMIN_TOKEN_ENV = "HOOKINBOX_ADMIN_TOKEN"
MIN_TOKEN_LENGTH = 16
MIN_TOKEN_BITS = 64
"""The least entropy a token may show, estimated from its own character frequencies (the
Shannon entropy of the string times its length). `secrets.token_urlsafe(32)` shows about 180;
`aaaaaaaaaaaaaaaa` shows 0, `abcdabcdabcdabcd` 32."""
MAX_STEP_SHARE = 0.5
"""The largest share of neighbouring pairs one step apart by the same amount: a run such as
`0123456789abcdef` (every step +1) is a pattern, however many distinct characters it has."""
HOW_TO_MAKE_ONE = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def estimated_bits(token: str) -> float:
    """The token's length times the Shannon entropy of its characters, in bits."""
    counts = Counter(token)
    size = len(token)
    return -size * sum(n / size * math.log2(n / size) for n in counts.values())


def step_share(token: str) -> float:
    """The share of neighbouring pairs taken by the most common code point step."""
    steps = Counter(ord(b) - ord(a) for a, b in pairwise(token))
    return max(steps.values()) / (len(token) - 1) if steps else 1.0


def check_token_strength(token: str) -> str:
    """A token short or regular enough to guess is refused when the dashboard starts.

    These checks catch placeholders and typed patterns (`aaaa...`, `abcdabcd...`,
    `0123...`); they cannot tell a random-looking password from a random token. Generate it.
    """
    stripped = token.strip()
    if len(stripped) < MIN_TOKEN_LENGTH:  # sixteen spaces are no token
        raise ConfigurationError(
            f"the admin token must be at least {MIN_TOKEN_LENGTH} characters ({HOW_TO_MAKE_ONE})"
        )
    if estimated_bits(stripped) < MIN_TOKEN_BITS or step_share(stripped) > MAX_STEP_SHARE:
        raise ConfigurationError(
            "the admin token is too regular to be secret (repeated characters or a run); "
            f"use a random one of 32 characters or more ({HOW_TO_MAKE_ONE})"
        )
    return token
