"""Log lines as JSON objects (`--log-format json`), one per line, for log pipelines.

The standard library has no JSON formatter; the few lines below avoid a dependency for it.
Fields that hookinbox attaches to its records (`extra=`) become top-level keys, so a query
like `outcome = "duplicate" and source = "stripe"` works without parsing messages.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

FIELDS = ("source", "event_id", "event_type", "outcome", "status_code", "latency_ms", "attempt")


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                document[name] = value
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str)
