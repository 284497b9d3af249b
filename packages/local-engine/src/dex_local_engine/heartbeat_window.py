"""A Step attempt's heartbeat timeout, counted only while the attempt is on a Worker.

Time spent waiting for a free Worker (or after a Worker declined the task) is not the Worker's
silence, so the window opens when the dispatcher hands the task to a Worker and restarts with
every frame the Worker sends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["HeartbeatWindow"]


class HeartbeatWindow:
    """Raises ``TimeoutError`` in its block after ``seconds`` without a frame on a Worker.

    Example::

        window = HeartbeatWindow(5.0)
        async with window.armed():
            frame = await next_frame()   # window.on_worker(True) is called by the dispatcher
            window.restart()
    """

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds
        self._timeout: asyncio.Timeout | None = None
        self._on_worker = False
        self._expired = False

    @asynccontextmanager
    async def armed(self) -> AsyncIterator[None]:
        """The block the window applies to (without ``seconds`` it never expires)."""
        timeout = asyncio.timeout(None)
        try:
            async with timeout:
                self._timeout = timeout
                yield
        finally:
            # Unbound first: the dispatcher may report after the block, when rescheduling fails.
            self._timeout = None
            self._expired = timeout.expired()

    def on_worker(self, on_worker: bool) -> None:
        """The task was handed to a Worker (True) or went back to waiting for one (False)."""
        self._on_worker = on_worker
        self.restart()

    def restart(self) -> None:
        """A frame arrived: the Worker has ``seconds`` again."""
        if self._timeout is None or self._seconds is None or self._timeout.expired():
            # An expiring window cannot be moved (asyncio raises): the attempt already timed out,
            # and the dispatcher's report of the task going back to waiting must not turn that
            # heartbeat timeout into a dispatch error.
            return
        if self._on_worker:
            self._timeout.reschedule(asyncio.get_running_loop().time() + self._seconds)
        else:
            self._timeout.reschedule(None)

    @property
    def expired(self) -> bool:
        """Whether the block ended because the window expired."""
        return self._expired
