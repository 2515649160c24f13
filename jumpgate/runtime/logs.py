"""The server's logs (docs/operations.md, "Logs"): today's text lines, or one JSON object per line
(`jumpgate serve --log-format json`) that a log shipper can index without parsing prose.

A line logged while the server works on a job carries the job's id. The executor sets `JOB_ID` in
every thread it runs a job's work in (the job's own thread, the pool that runs its life-cycle
steps and stages, the threads that destroy its NCAs); a thread started by other code does not
inherit it (Python threads start with an empty context), so such code passes the id itself
(`extra={"job_id": ...}`), as the job store does.
"""
from __future__ import annotations

import json
import logging
import logging.config
import sys
import threading
from contextvars import ContextVar
from datetime import UTC, datetime

# The id of the job the current thread works on; None outside a job's work.
JOB_ID: ContextVar[str | None] = ContextVar("jumpgate_job_id", default=None)

FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, and job_id when
    the record was logged for a job; exception and stack when the record has them."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        # Formatted in the thread that logs (handlers here are synchronous), so the context is
        # that of the code that logged.
        job = getattr(record, "job_id", None) or JOB_ID.get()
        if job:
            out["job_id"] = job
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def json_config(level: str) -> dict:
    """A `logging.config.dictConfig` for JSON lines on standard error, for Jumpgate's loggers,
    uvicorn's (its server and access lines) and everything else (the root logger), given to
    uvicorn as its `log_config` so that it does not install its own text handlers."""
    handler = {"handlers": ["json"], "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,  # module loggers exist already (imported before this)
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"json": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "loggers": {"uvicorn": {**handler, "level": "INFO"}, "uvicorn.access": {**handler, "level": "INFO"},
                    "jumpgate": {**handler, "level": _level(level)}},
        "root": {"handlers": ["json"], "level": "WARNING"},
    }


def configure(fmt: str, level: str) -> dict | None:
    """Set up the server's logging; returns the config uvicorn must use (None: its own, for text).
    `level` (--log-level) applies to Jumpgate's loggers as well as uvicorn's; libraries stay at
    WARNING either way."""
    if fmt == "json":
        config = json_config(level)
        logging.config.dictConfig(config)
        # What would otherwise reach standard error as prose goes through the JSON handler too.
        logging.captureWarnings(True)
        threading.excepthook = _log_thread_exception
        sys.excepthook = _log_exception
        return config
    logging.getLogger("jumpgate").setLevel(_level(level))
    return None


def _level(name: str) -> int | str:
    """A --log-level name as logging takes it; uvicorn's "trace" (below DEBUG) is a number here
    because uvicorn registers its name only when it starts."""
    return 5 if name.lower() == "trace" else name.upper()


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return  # as the default hook: a thread that exits on purpose is no error
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("jumpgate").error("uncaught exception in thread %s", name,
                                        exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


def _log_exception(exc_type, exc_value, traceback) -> None:
    logging.getLogger("jumpgate").critical("uncaught exception", exc_info=(exc_type, exc_value, traceback))
