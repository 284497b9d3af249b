"""Attribute locks: per run, which Step execution or RPC holds each locked Attribute key.

A Step method waits for its keys (a Step's lock is part of its schedule); an RPC does not wait,
it fails with a lock conflict when any key is held, as Dex documents. Locks live in memory: a
restarted engine starts with none held.
"""

from __future__ import annotations

from collections.abc import Sequence

from dex_local_engine.run_waiters import RunWaiters

__all__ = ["AttributeLocks"]

_RECHECK_SECONDS = 1.0


class AttributeLocks:
    """The lock table of every run.

    Example::

        locks = AttributeLocks()
        await locks.acquire("run-1", ["balance"], "Charge-1")
        locks.release("run-1", ["balance"], "Charge-1")
    """

    def __init__(self) -> None:
        self._held: dict[str, dict[str, str]] = {}
        self._waiters = RunWaiters()

    async def acquire(self, run_id: str, keys: Sequence[str], holder: str) -> None:
        """Take ``keys`` for ``holder``, waiting while another holder has any of them."""
        if not keys:
            return
        while True:
            held = self._held.setdefault(run_id, {})
            if all(held.get(key, holder) == holder for key in keys):
                for key in keys:
                    held[key] = holder
                return
            await self._waiters.wait(run_id, _RECHECK_SECONDS)

    def try_acquire(self, run_id: str, keys: Sequence[str], holder: str) -> list[str]:
        """Take ``keys`` at once; or, when any is held, take none and return the held ones."""
        if not keys:
            return []
        held = self._held.setdefault(run_id, {})
        conflicts = [key for key in keys if key in held]
        if not conflicts:
            for key in keys:
                held[key] = holder
        return conflicts

    def release(self, run_id: str, keys: Sequence[str], holder: str) -> None:
        """Give up those of ``keys`` that ``holder`` holds."""
        held = self._held.get(run_id)
        if not held:
            return
        for key in keys:
            if held.get(key) == holder:
                del held[key]
        self._forget_if_empty(run_id, held)
        self._waiters.notify(run_id)

    def release_holder(self, run_id: str, holder: str) -> None:
        """Give up every key ``holder`` holds (its Step execution ended)."""
        held = self._held.get(run_id)
        if held:
            for key in [k for k, h in held.items() if h == holder]:
                del held[key]
            self._forget_if_empty(run_id, held)
            self._waiters.notify(run_id)

    def _forget_if_empty(self, run_id: str, held: dict[str, str]) -> None:
        # Runs without held keys keep no entry, so the table does not grow with served runs.
        if not held and self._held.get(run_id) is held:
            del self._held[run_id]

    def forget_run(self, run_id: str) -> None:
        """Drop every lock of a closed run."""
        self._held.pop(run_id, None)
        self._waiters.notify(run_id)
