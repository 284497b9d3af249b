"""Tracing never fails or retries a Step: every OpenTelemetry call runs guarded.

A failure is logged on the ``dex_agents.tracing`` logger: the first one in a process as a warning
with its traceback, later ones at debug level, so a broken span processor cannot flood the log.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Final, TypeVar

__all__ = ["TRACING_LOGGER_NAME", "guarded", "report_tracing_failure"]

TRACING_LOGGER_NAME: Final = "dex_agents.tracing"

_logger: Final = logging.getLogger(TRACING_LOGGER_NAME)
_lock: Final = threading.Lock()
_failures = 0

ResultT = TypeVar("ResultT")


def report_tracing_failure(what: str) -> None:
    """Log the exception being handled as a tracing failure of ``what``; never raises."""
    global _failures
    try:
        with _lock:
            _failures += 1
            first = _failures == 1
        if first:
            _logger.warning(
                "tracing failed while %s; the span is skipped and the Step goes on "
                "(later tracing failures log at debug level)",
                what,
                exc_info=True,
            )
        else:
            _logger.debug("tracing failed while %s; the span is skipped", what, exc_info=True)
    except Exception:  # pragma: no cover - logging itself broke; tracing still must not fail
        pass


def guarded(what: str, call: Callable[[], ResultT]) -> ResultT | None:
    """Return ``call()``, or ``None`` after logging a tracing failure when it raises."""
    try:
        return call()
    except Exception:
        report_tracing_failure(what)
        return None
