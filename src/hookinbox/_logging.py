"""Log lines as JSON objects (`--log-format json`), one per line, for log pipelines.

The standard library has no JSON formatter; the few lines below avoid a dependency for it.
Fields that hookinbox attaches to its records (`extra=`) become top-level keys, so a query
like `outcome = "duplicate" and source = "stripe"` works without parsing messages.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from hookinbox._text import printable

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
    """Escapes what a record carries before any handler formats it, whatever the format.

    Event ids, types, source names (from a request's path), header values and error messages
    come from deliveries, requests and handlers. A lone surrogate among them made a UTF-8 log
    file's handler print "--- Logging error ---" instead of the line; an escape sequence
    reached the operator's terminal; a line break forged a whole line of the text log
    (`%0a...accepted 200` in a path). So the message, its arguments in it, is written on one
    line with its control and bidi characters escaped (`hookinbox._text.printable`), and a
    traceback keeps its line breaks only. The JSON formatter's own escaping is then a
    second layer; its top-level fields (`extra=`) are left exact for queries. Logger filters
    are not inherited, so `logger()` puts this one on each hookinbox logger.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: left for logging to report as it always does
            return True
        # The message is formatted here, once: whatever an argument is (a string, an
        # exception whose text came from a request), what it printed is escaped.
        record.msg, record.args = printable(message, one_line=True), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = printable(_FORMATTER.formatException(record.exc_info))
        return True


_FORMATTER = logging.Formatter()
_SAFE_TEXT = _SafeText()


def logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)`, with untrusted text escaped in its records."""
    found = logging.getLogger(name)
    if _SAFE_TEXT not in found.filters:
        found.addFilter(_SAFE_TEXT)
    return found
