"""Quiet Worker logs: one WARNING line per failed Step attempt, its traceback at DEBUG.

The Dex SDK logs every failed Step attempt with ``logger.exception`` ("Python Worker invocation
failed" and a full traceback, often three chained ones for a provider error). Dex retries the
attempt, so for a reader it is one event, not a crash: :func:`quiet_worker_logging` turns that
record into one line naming the Step, the attempt and the error, and logs the traceback at DEBUG
on ``dex_agents.worker``, where ``--verbose`` or a DEBUG handler still shows it.
"""

from __future__ import annotations

import logging
import traceback
from typing import Final

from dex import Step

__all__ = ["WORKER_LOGGER_NAME", "StepAttemptLogFilter", "quiet_worker_logging"]

WORKER_LOGGER_NAME: Final = "dex_agents.worker"
"""The logger of failed Step attempts' tracebacks (DEBUG)."""

# The SDK modules that log a failed invocation with logger.exception.
_SDK_WORKER_LOGGERS: Final = (
    "dex._pull_worker",
    "dex._async_worker_service",
    "dex._worker_service",
)
_INVOCATION_FAILED: Final = "invocation failed"
_MAX_ERROR_CHARS: Final = 300
_logger: Final = logging.getLogger(WORKER_LOGGER_NAME)


class StepAttemptLogFilter(logging.Filter):
    """Rewrites the SDK's "Worker invocation failed" traceback into one WARNING line.

    The line names the Step type, the attempt (when the Step's context says it) and the error's
    first line; the traceback goes to ``dex_agents.worker`` at DEBUG. Every other record passes
    unchanged.

    Example:
        >>> import logging
        >>> logging.getLogger("dex._pull_worker").addFilter(StepAttemptLogFilter())
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite a failed-invocation record in place; keep every record."""
        if record.exc_info is None or _INVOCATION_FAILED not in str(record.msg):
            return True
        error = record.exc_info[1]
        if error is None:
            return True
        _logger.debug("traceback of the failed Step attempt", exc_info=record.exc_info)
        record.msg = "%s failed: %s"
        record.args = (_attempt_name(error), _error_line(error))
        record.levelno = logging.WARNING
        record.levelname = logging.getLevelName(logging.WARNING)
        record.exc_info = None
        record.exc_text = None
        return True


def quiet_worker_logging() -> None:
    """Log failed Step attempts of this process's Workers as one WARNING line each.

    Installs :class:`StepAttemptLogFilter` on the Dex SDK's Worker loggers, once; the tracebacks
    stay available at DEBUG on ``dex_agents.worker``. ``in_process_worker`` calls it; call it
    before you start a ``dex`` Worker of your own.

    Example:
        >>> quiet_worker_logging()
    """
    for name in _SDK_WORKER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, StepAttemptLogFilter) for existing in logger.filters):
            logger.addFilter(StepAttemptLogFilter())


def _attempt_name(error: BaseException) -> str:
    """ "RunModel attempt 2", from the Step's frame in the traceback; "a Step attempt" without."""
    # The SDK logs after the Step returned, so only the traceback still knows which Step and
    # which attempt failed: the outermost frame of a Step method holds both.
    for frame, _ in traceback.walk_tb(error.__traceback__):
        step = frame.f_locals.get("self")
        if isinstance(step, Step):
            attempt = getattr(frame.f_locals.get("context"), "attempt", None)
            name = type(step).__name__
            return f"{name} attempt {attempt}" if isinstance(attempt, int) else name
    return "a Step attempt"


def _error_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or "(no message)"
    if len(text) > _MAX_ERROR_CHARS:
        text = text[: _MAX_ERROR_CHARS - 1] + "…"
    return f"{type(error).__name__}: {text}"
