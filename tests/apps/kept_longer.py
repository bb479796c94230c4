"""An inbox whose Stripe events are kept 400 days and GitHub's for the inbox's 90 (the CLI's
retention per source)."""

from __future__ import annotations

from datetime import timedelta

from hookinbox import Inbox
from hookinbox.sources import GitHub, Stripe

inbox = Inbox(retention=timedelta(days=90))
inbox.add_source(Stripe(secret="whsec_kept_longer"), retention=timedelta(days=400))
inbox.add_source(GitHub(secret="kept-longer"))
