"""File gates: a Worker child stops at a named point until the test releases it."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from dex_agents.exceptions import ConfigurationError
from dex_agents.testing._waiting import DEFAULT_WAIT_TIMEOUT_SECONDS, wait_until

_POLL_INTERVAL_SECONDS = 0.01


class FileGate:
    """A named gate shared through files by a test and its Worker processes.

    In the Worker child a tool calls ``mark_reached()`` and then awaits
    ``wait_for_release()``; the test awaits ``wait_until_reached()`` and then
    kills the Worker at that exact point, or calls ``release()``. Each arrival
    is counted, so a test can wait for the second attempt of a Step after a
    crash with ``wait_until_reached(count=2)``. Once released, the gate stays
    open for every later arrival. Two gates reached at the same time prove that
    two Steps run in parallel.

    Raises:
        ConfigurationError: ``name`` is empty or contains a path separator.

    Example:
        >>> import asyncio
        >>> gate = FileGate(tmp_path, "refund")
        >>> gate.mark_reached()  # in the Worker child, from the tool
        >>> asyncio.run(gate.wait_until_reached())  # in the test
        >>> gate.release()
        >>> gate.reached_count
        1
    """

    def __init__(self, state_dir: Path | str, name: str) -> None:
        if not name or "/" in name or os.sep in name or name in (".", ".."):
            raise ConfigurationError(
                f"gate name {name!r} must be non-empty and contain no path separator"
            )
        self.name = name
        directory = Path(state_dir) / "gates"
        self._reached_path = directory / f"{name}.reached"
        self._released_path = directory / f"{name}.released"

    def mark_reached(self) -> None:
        """Record one arrival at the gate (called in the Worker child)."""
        self._reached_path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self._reached_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            # One byte per arrival in one O_APPEND write, so concurrent arrivals never merge.
            os.write(descriptor, b".")
        finally:
            os.close(descriptor)

    @property
    def reached_count(self) -> int:
        """How many times the gate was reached, by every process together."""
        try:
            return self._reached_path.stat().st_size
        except FileNotFoundError:
            return 0

    @property
    def is_released(self) -> bool:
        """Whether ``release()`` was called."""
        return self._released_path.exists()

    async def wait_for_release(self) -> None:
        """Wait, without a deadline, until the test releases the gate (Worker child)."""
        while not self.is_released:
            await asyncio.sleep(_POLL_INTERVAL_SECONDS)

    def wait_for_release_blocking(self) -> None:
        """``wait_for_release`` for a sync tool, which runs in a worker thread."""
        while not self.is_released:
            time.sleep(_POLL_INTERVAL_SECONDS)

    async def wait_until_reached(
        self, count: int = 1, timeout: float = DEFAULT_WAIT_TIMEOUT_SECONDS
    ) -> None:
        """Wait until the gate was reached at least ``count`` times (test side).

        Raises:
            WaitTimeoutError: Fewer arrivals than ``count`` before the deadline.
        """
        await wait_until(
            f"gate {self.name!r} to be reached {count} time(s)",
            lambda: self.reached_count >= count,
            timeout,
        )

    def release(self) -> None:
        """Open the gate for every current and later arrival (test side)."""
        self._released_path.parent.mkdir(parents=True, exist_ok=True)
        self._released_path.touch()
