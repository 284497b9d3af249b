"""The base of every error class of the engine, so a caller can catch anything it raised on purpose.

Each engine error derives from :class:`DexLocalEngineError`, and those that replace a built-in
error keep that built-in as a second base, so an existing ``except ValueError`` still works.

Example::

    try:
        PullDispatcher(no_capacity_retry_seconds=0)
    except DexLocalEngineError as error:
        print(error)
"""

from __future__ import annotations

__all__ = ["DexLocalEngineError", "EngineConfigurationError"]


class DexLocalEngineError(Exception):
    """Anything dex-local-engine raises on purpose."""


class EngineConfigurationError(DexLocalEngineError, ValueError):
    """An engine part was built with an argument it cannot work with (the message names it)."""
