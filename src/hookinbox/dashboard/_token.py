"""The admin token's variable and strength check: what `hookinbox serve` needs to decide
whether the dashboard is on, without importing the dashboard's web stack."""

from __future__ import annotations

from hookinbox._errors import ConfigurationError

ADMIN_TOKEN_ENV = "HOOKINBOX_ADMIN_TOKEN"
MIN_TOKEN_LENGTH = 16


def check_token_strength(token: str) -> str:
    """A token short enough to guess is refused when the dashboard starts."""
    if len(token.strip()) < MIN_TOKEN_LENGTH:  # sixteen spaces are no token
        raise ConfigurationError(
            f"the admin token must be at least {MIN_TOKEN_LENGTH} characters "
            "(make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return token
