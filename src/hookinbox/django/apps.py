"""The Django app `hookinbox.django` (label `hookinbox`): migrations, checks, the worker command."""

from __future__ import annotations

from django.apps import AppConfig


class HookinboxConfig(AppConfig):
    name = "hookinbox.django"
    label = "hookinbox"
    verbose_name = "hookinbox"

    def ready(self) -> None:
        from hookinbox.django import checks  # noqa: F401  (registers the system checks)
