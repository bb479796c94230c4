"""`path("webhooks/", include("hookinbox.django.urls"))`: the view for settings.HOOKINBOX_INBOX."""

from __future__ import annotations

from django.urls import path

from hookinbox.django._inbox import configured_inbox
from hookinbox.django.views import webhook_view

app_name = "hookinbox"

urlpatterns = [path("<str:source>", webhook_view(configured_inbox()), name="receive")]
