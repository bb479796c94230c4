"""Django: hookinbox in a Django project, in Django's database and Django's transactions.

    INSTALLED_APPS = [..., "hookinbox.django"]         # migrations, checks, hookinbox_worker
    HOOKINBOX_INBOX = "shop.webhooks.inbox"            # a DjangoInbox
    urlpatterns = [path("webhooks/", include("hookinbox.django.urls"))]

`DjangoInbox` keeps hookinbox's tables in a Django database and runs every hookinbox
transaction as a `transaction.atomic()` block on Django's own connection, so a handler's ORM
writes commit with the event's processed mark, or roll back with it.
"""

from hookinbox.django._inbox import DjangoInbox
from hookinbox.django._store import DjangoStore, TransactionBroken
from hookinbox.django.views import webhook_view

__all__ = ["DjangoInbox", "DjangoStore", "TransactionBroken", "webhook_view"]
