"""Heartbeats of one async Step attempt: on demand, in the background, and with a checkpoint.

Dex clears a saved checkpoint on a heartbeat without a value, so every heartbeat after a save, the
background ones included, carries the checkpoint again. An attempt starts from the checkpoint of
the attempt before it, so a retry that dies early keeps it for the next one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Final

from dex import AsyncContext

__all__ = ["HEARTBEAT_INTERVAL_SECONDS", "Heartbeat"]

_logger: Final = logging.getLogger("dex_agents.session")

HEARTBEAT_INTERVAL_SECONDS: Final = 20.0
"""Seconds between the background heartbeats the session records while a runner call runs."""


class Heartbeat:
    """Records heartbeats of one async Step attempt, carrying the attempt's saved checkpoint.

    Args:
        context: The Step attempt's context.
    """

    def __init__(self, context: AsyncContext) -> None:
        self._context = context
        self.checkpoint: str | None = (
            context.get_last_heartbeat_value(str) if context.has_last_heartbeat_value() else None
        )

    async def beat(self) -> None:
        """Record one heartbeat."""
        if self.checkpoint is None:
            await self._context.heartbeat()
        else:
            await self._context.heartbeat(self.checkpoint)

    async def save_checkpoint(self, checkpoint: str) -> None:
        """Record a heartbeat carrying ``checkpoint``; later heartbeats carry it too."""
        self.checkpoint = checkpoint
        await self.beat()

    @asynccontextmanager
    async def in_background(self) -> AsyncIterator[None]:
        """Heartbeat every 20 seconds while the block runs (a runner call)."""
        task = asyncio.create_task(self._beat_forever())
        try:
            yield
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_SECONDS)
            try:
                await self.beat()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A lost heartbeat only risks a heartbeat timeout; it must not fail the call.
                _logger.warning("a background heartbeat failed", exc_info=True)
