"""Futures of coroutines waiting for a Flow run to change (long polls, lock waits)."""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["RunWaiters"]


class RunWaiters:
    """Wake-ups per run ID.

    Example::

        waiters = RunWaiters()
        await waiters.wait(run_id, 30.0)   # elsewhere: waiters.notify(run_id)
    """

    def __init__(self) -> None:
        self._by_run: dict[str, list[asyncio.Future[None]]] = {}

    def notify(self, run_id: str) -> None:
        """Wake every coroutine waiting on ``run_id``."""
        for future in self._by_run.pop(run_id, []):
            if not future.done():
                future.set_result(None)

    async def wait(self, run_id: str, timeout: float) -> None:
        """Return at the next :meth:`notify` of ``run_id`` or after ``timeout`` seconds."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = self._by_run.setdefault(run_id, [])
        waiting.append(future)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(future, timeout)
        finally:
            # A long poll that timed out must not leave its future behind for an idle run.
            if future in waiting:
                waiting.remove(future)
            if not waiting and self._by_run.get(run_id) is waiting:
                del self._by_run[run_id]
