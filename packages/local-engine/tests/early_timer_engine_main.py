"""Child-process entry point: ``dex-local-engine`` on an event loop that runs timers early.

Its loop runs every ``call_at``/``call_later`` callback :data:`EARLY_SECONDS` before it is due, as
uvloop runs some up to a millisecond early (libuv counts whole milliseconds on a coarse clock), so
a test sees on every Timer what uvloop does now and then::

    python early_timer_engine_main.py serve --address 127.0.0.1:0 --database engine.db
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

from dex_local_engine import cli
from dex_local_engine.event_loop import EventLoopKind

EARLY_SECONDS = 0.05


class EarlyTimerLoop(asyncio.SelectorEventLoop):
    """asyncio's loop, with every timer callback run :data:`EARLY_SECONDS` early."""

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: Any = None,
    ) -> asyncio.TimerHandle:
        return super().call_at(when - EARLY_SECONDS, callback, *args, context=context)


def _early_timer_loop() -> tuple[EventLoopKind, Callable[[], asyncio.AbstractEventLoop]]:
    return EventLoopKind.ASYNCIO, EarlyTimerLoop


if __name__ == "__main__":
    cli.choose_event_loop = _early_timer_loop  # type: ignore[assignment]
    sys.exit(cli.main())
