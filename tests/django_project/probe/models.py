from __future__ import annotations

from django.db import models


class Mark(models.Model):
    """One row per handler run that got as far as its ORM write."""

    name: models.CharField[str, str] = models.CharField(max_length=255, unique=True)
