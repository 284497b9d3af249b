"""The Worker's garbage collector: freeze what start-up left alive before serving tasks.

A Worker imports its framework, the SDK and the agents' Flows: about 130,000 objects that live as
long as the process. Python's generation-2 collection walks all of them each time (about 70 ms,
every 40 turns or so: 2.4 ms of a turn's CPU). ``gc.freeze()`` moves them to the permanent
generation, which no collection walks, as the local engine does after start-up. Cyclic garbage
made later is collected as before; the collection thresholds stay Python's (a larger young
generation measured no better in the Worker).

Our Worker entry points call :func:`freeze_worker_startup_objects` once the Worker is registered:
``dex-agents worker``, the ``dex_agents.testing`` Worker child and ``LocalRuntime``. A Worker a
user builds with the SDK in their own process is left alone.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping
from typing import Final

__all__ = ["WORKER_GC_FREEZE_ENV", "freeze_worker_startup_objects", "worker_gc_freeze_enabled"]

WORKER_GC_FREEZE_ENV: Final = "DEX_AGENTS_WORKER_GC_FREEZE"
"""Set to ``0`` (or ``false``, ``no``, ``off``) to leave the Worker's collector alone."""

_OFF_VALUES: Final = frozenset({"0", "false", "no", "off"})


def worker_gc_freeze_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``DEX_AGENTS_WORKER_GC_FREEZE`` lets the Worker freeze its start-up objects.

    Example:
        >>> worker_gc_freeze_enabled({}), worker_gc_freeze_enabled({"DEX_AGENTS_WORKER_GC_FREEZE": "0"})
        (True, False)
    """
    settings = os.environ if environ is None else environ
    return settings.get(WORKER_GC_FREEZE_ENV, "").strip().lower() not in _OFF_VALUES


def freeze_worker_startup_objects() -> None:
    """Collect once, then keep every object alive now out of all later collections.

    Does nothing when turned off by ``DEX_AGENTS_WORKER_GC_FREEZE=0``, or when the process has
    frozen objects already (an earlier runtime in the same notebook, or the application's own
    choice): freezing once bounds what can never be collected to what start-up left alive.
    """
    if not worker_gc_freeze_enabled() or gc.get_freeze_count() > 0:
        return
    # Collect first, so start-up's own garbage is freed rather than frozen for good.
    gc.collect()
    gc.freeze()
