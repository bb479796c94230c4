from __future__ import annotations

from datetime import datetime

from django.db import models


class Order(models.Model):
    # UNIQUE is the second safety net: hookinbox runs the handler once per event, and a payment
    # that reached us in two different events still makes one order. (The annotations are for
    # mypy without the django-stubs plugin; a project with the plugin can drop them.)
    payment_id: models.CharField[str, str] = models.CharField(max_length=255, unique=True)
    customer_id: models.CharField[str, str] = models.CharField(max_length=255, blank=True)
    amount: models.IntegerField[int, int] = models.IntegerField()
    currency: models.CharField[str, str] = models.CharField(max_length=3)
    event_id: models.CharField[str, str] = models.CharField(max_length=255)
    created_at: models.DateTimeField[datetime, datetime] = models.DateTimeField(auto_now_add=True)
