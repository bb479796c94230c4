"""`DjangoInbox`, and finding the project's inbox from `settings.HOOKINBOX_INBOX`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from django.utils.module_loading import import_string
from sqlalchemy import Connection

from hookinbox._errors import ConfigurationError
from hookinbox._inbox import BaseInbox, Inbox
from hookinbox._runtime import StoreFactory
from hookinbox._settings import current_overrides
from hookinbox.django._store import DjangoStore

SETTING = "HOOKINBOX_INBOX"

G = TypeVar("G", bound=Callable[[Connection], None])


class DjangoInbox(Inbox):
    """An `Inbox` that keeps its tables in a Django database and works in Django's transactions.

    Handlers may write with the Django ORM: their writes, `ctx.db`'s and the processed mark
    commit together in one `transaction.atomic()`, or roll back together. `using` names the
    database in `settings.DATABASES`; every other keyword is `Inbox`'s (`group_commit` is off
    unless you turn it on).
    """

    def __init__(self, *, using: str = DEFAULT_DB_ALIAS, **options: Any) -> None:
        for name in ("auto_migrate", "database_url"):
            if name in options:
                raise ConfigurationError(
                    f"a DjangoInbox takes no {name}: it uses settings.DATABASES[{using!r}] and "
                    "Django's migrations"
                )
        self.using = using
        # Each delivery commits in its own request's connection, as Django code expects (and
        # Django's TestCase can see and roll back), not in a writer thread's shared transaction.
        options.setdefault("group_commit", False)
        super().__init__(auto_migrate=False, **options)

    def _database_url(self, argument: str | None) -> str:
        if current_overrides().database_url:
            raise ConfigurationError(
                f"a DjangoInbox uses settings.DATABASES[{self.using!r}]; change it there, "
                "not with --database-url"
            )
        return f"django:{self.using}"

    def _store_factory(self) -> StoreFactory:
        return lambda settings, _registry: DjangoStore(self.using, settings.store_options)

    def after_migrate(self, function: G) -> G:
        raise ConfigurationError("with Django, create your own tables with Django migrations")

    def __repr__(self) -> str:
        return f"DjangoInbox(using={self.using!r}, sources={sorted(self.sources)})"


def configured_inbox() -> BaseInbox:
    """The inbox named by `settings.HOOKINBOX_INBOX`, a dotted path like WSGI_APPLICATION's."""
    spec = getattr(settings, SETTING, None)
    if not isinstance(spec, str) or not spec:
        raise ConfigurationError(
            f"set {SETTING} in Django's settings to your inbox, e.g. 'shop.webhooks.inbox'"
        )
    try:
        target = import_string(spec)
    except ImportError as error:
        raise ConfigurationError(f"{SETTING} = {spec!r} cannot be imported: {error}") from error
    if not isinstance(target, BaseInbox):
        raise ConfigurationError(f"{SETTING} = {spec!r} is a {type(target).__name__}, not an Inbox")
    return target
