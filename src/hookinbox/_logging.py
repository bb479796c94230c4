"""Log lines as JSON objects (`--log-format json`), one per line, for log pipelines.

The standard library has no JSON formatter; the few lines below avoid a dependency for it.
Fields that hookinbox attaches to its records (`extra=`) become top-level keys, so a query
like `outcome = "duplicate" and source = "stripe"` works without parsing messages.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from hookinbox._text import safe_text

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


class _SafeText(logging.Filter):
    """Escapes lone surrogates and NUL in a record before any handler formats it.

    Event ids, types and error messages come from deliveries and handlers: a surrogate among
    them made a UTF-8 log file's handler print "--- Logging error ---" instead of the line.
    Logger filters are not inherited, so `logger()` puts this one on each hookinbox logger.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = safe_text(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(safe_text(a) if isinstance(a, str) else a for a in record.args)
        if record.exc_info and not record.exc_text:
            record.exc_text = safe_text(_FORMATTER.formatException(record.exc_info))
        return True


_FORMATTER = logging.Formatter()
_SAFE_TEXT = _SafeText()


def logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)`, with untrusted text escaped in its records."""
    found = logging.getLogger(name)
    if _SAFE_TEXT not in found.filters:
        found.addFilter(_SAFE_TEXT)
    return found
