"""`init_logging`: a root logging handler configured from `LOG_LEVEL` and `LOG_FORMAT`,
the same variables the Rust SDK reads. Malformed values raise ConfigError."""

from __future__ import annotations

import json
import logging
import os
import sys

from .errors import ConfigError


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "timestamp": self.formatTime(record),
            "level": record.levelname,
            "target": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out)


def init_logging() -> None:
    """Installs a stderr handler on the root logger: `LOG_LEVEL` (default info; one of
    trace, debug, info, warn, warning, error) and `LOG_FORMAT` (text, the default, or json)."""
    level = (os.environ.get("LOG_LEVEL") or "info").strip().lower()
    levels = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
              "warn": logging.WARNING, "warning": logging.WARNING, "error": logging.ERROR}
    # A Rust-style directive list ("info,converge_sdk=debug") uses its first bare level.
    bare = [p for p in level.split(",") if "=" not in p and p]
    if not bare or bare[0] not in levels:
        raise ConfigError.invalid("LOG_LEVEL", level, f"expected one of {', '.join(levels)}")
    fmt = (os.environ.get("LOG_FORMAT") or "text").strip()
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    elif fmt == "text":
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    else:
        raise ConfigError.invalid("LOG_FORMAT", fmt, "expected json or text")
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(levels[bare[0]])
