"""Settings of the probe project; the database comes from PROBE_DATABASE_URL."""

from __future__ import annotations

import os

from hookinbox.examples.django_shop.settings import database

SECRET_KEY = "tests-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
ROOT_URLCONF = "tests.django_project.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["hookinbox.django", "tests.django_project.probe"]
HOOKINBOX_INBOX = "tests.django_project.probe.webhooks.inbox"
# What a real project has on: CSRF checks (providers send no token) and request transactions.
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
]

DATABASES = {"default": {**database(os.environ["PROBE_DATABASE_URL"]), "ATOMIC_REQUESTS": True}}
if os.environ.get("PROBE_SQLITE_TRANSACTION_MODE"):  # the system check's test
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = os.environ[
        "PROBE_SQLITE_TRANSACTION_MODE"
    ]
if DATABASES["default"]["ENGINE"].endswith("mysql"):
    # A session time zone that is not UTC: hookinbox's times must not depend on it.
    DATABASES["default"]["OPTIONS"]["init_command"] = "SET time_zone = '+09:00'"
    for name in ("isolation_level", "charset"):  # what hookinbox refuses, for its tests
        if f"PROBE_MYSQL_{name.upper()}" in os.environ:
            DATABASES["default"]["OPTIONS"][name] = os.environ[f"PROBE_MYSQL_{name.upper()}"]
if os.environ.get("PROBE_LOGGING"):  # a project that routes logging itself (the worker's test)
    _project = {"format": "project-log %(levelname)s %(name)s %(message)s"}
    _out = {"class": "logging.StreamHandler", "stream": "ext://sys.stdout", "formatter": "project"}
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"project": _project},
        "handlers": {"out": _out},
        "root": {"handlers": ["out"], "level": os.environ["PROBE_LOGGING"]},
    }
