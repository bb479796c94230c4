"""Settings of the example shop; the hookinbox lines are marked."""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy.engine import make_url

SECRET_KEY = os.environ.get("SHOP_SECRET_KEY", "local-trial-only")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "hookinbox.examples.django_shop.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "hookinbox.django",  # hookinbox: migrations for its tables, checks, hookinbox_worker
    "hookinbox.examples.django_shop.orders",
]
HOOKINBOX_INBOX = "hookinbox.examples.django_shop.orders.webhooks.inbox"  # hookinbox
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",  # the webhook view is exempt: providers sign
]


def database(url: str) -> dict[str, Any]:
    """A DATABASES entry for a sqlite:///, postgresql:// or mysql:// (MariaDB) URL."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": parsed.database,
            "OPTIONS": {
                # hookinbox: transactions take the write lock when they begin (check W001),
                # and WAL lets the web process and the worker read while the other writes.
                "transaction_mode": "IMMEDIATE",
                "timeout": 5,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL",
            },
        }
    server = {
        "NAME": parsed.database,
        "USER": parsed.username or "",
        "PASSWORD": parsed.password or "",
        "HOST": parsed.host or "",
        "PORT": str(parsed.port or ""),
    }
    if parsed.get_backend_name() in ("mysql", "mariadb"):
        return {
            "ENGINE": "django.db.backends.mysql",  # mysqlclient, as Django requires
            **server,
            # hookinbox: both are Django's defaults, and hookinbox refuses any other.
            "OPTIONS": {"charset": "utf8mb4", "isolation_level": "read committed"},
        }
    return {"ENGINE": "django.db.backends.postgresql", **server}


DATABASES = {
    "default": database(os.environ.get("SHOP_DATABASE_URL", "sqlite:///hookinbox-django-shop.db"))
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"hookinbox": {"handlers": ["console"], "level": "INFO"}},  # hookinbox's lines
}
