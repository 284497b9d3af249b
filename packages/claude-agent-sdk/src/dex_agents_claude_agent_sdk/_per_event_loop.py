"""``PerEventLoop``: one started object per running event loop, made on first use."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["PerEventLoop"]

T = TypeVar("T")


@dataclass
class _Started(Generic[T]):
    value: T
    started: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class PerEventLoop(Generic[T]):
    """One ``T`` per running event loop, such as a loopback server bound to it: made and started
    by the first caller (the others wait for the start), and dropped with its loop.

    Example:
        >>> relays = PerEventLoop(ModelRelay, ModelRelay.start)
        >>> relay = await relays.get()
    """

    def __init__(self, make: Callable[[], T], start: Callable[[T], Awaitable[None]]) -> None:
        self._make = make
        self._start = start
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Started[T]] = (
            weakref.WeakKeyDictionary()
        )

    async def get(self) -> T:
        """The running loop's ``T``, started.

        Raises:
            Exception: Whatever making or starting it raises; the next call tries again.
        """
        loop = asyncio.get_running_loop()
        entry = self._by_loop.get(loop)
        if entry is None:
            entry = self._by_loop[loop] = _Started(self._make())
        async with entry.lock:
            if not entry.started:
                await self._start(entry.value)
                entry.started = True
        return entry.value
