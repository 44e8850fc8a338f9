"""The broker's log lines: plain text, or one JSON object per line for log pipelines.

KAFKETTE_LOG_FORMAT=json selects JSON (Kafka sets its logging outside server.properties too, through
log4j); anything else, or nothing, the plain format.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime

FORMAT_VARIABLE = "KAFKETTE_LOG_FORMAT"
PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """time (UTC, ISO 8601), level, logger, message, and the exception's traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure(level: int = logging.INFO) -> None:
    """Log to stderr in the format KAFKETTE_LOG_FORMAT names."""
    handler = logging.StreamHandler(sys.stderr)
    json_lines = os.environ.get(FORMAT_VARIABLE, "plain").strip().lower() == "json"
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(PLAIN))
    logging.basicConfig(level=level, handlers=[handler], force=True)
