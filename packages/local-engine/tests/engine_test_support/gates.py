"""File-based gates: a test stops a handler at an exact point, even in another process.

A handler calls :func:`pass_gate` at interesting points. A gate lets everyone through unless the
test *held* it; a held gate records each arrival and blocks the handler until the test releases
it. While a handler waits at a held gate the test can, for example, SIGKILL its Worker.

The gate directory reaches Worker child processes through the ``DEX_TEST_GATES_DIR`` environment
variable (:meth:`GateBoard.env`). Without it, :func:`pass_gate` does nothing, so flows that use
gates also run outside gate tests.

Example (test side)::

    gates.hold("charge.after-heartbeat")
    ...start the Flow...
    await gates.wait_arrived("charge.after-heartbeat")
    worker.kill()

Example (handler side)::

    yield heartbeat(1)
    pass_gate("charge.after-heartbeat")
"""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from pathlib import Path

GATES_DIR_ENV = "DEX_TEST_GATES_DIR"
_POLL_SECONDS = 0.02
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def _checked(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(
            f"gate name {name!r} must be 1-100 letters, digits, dots, underscores or hyphens"
        )
    return name


def pass_gate(name: str) -> None:
    """Handler side: pass the gate, blocking while the test holds it.

    Does nothing when no gate directory is configured or the gate is not held.
    """
    directory = os.environ.get(GATES_DIR_ENV)
    if not directory:
        return
    root = Path(directory)
    _checked(name)
    if not (root / f"{name}.held").exists():
        return
    (root / f"{name}.arrived.{os.getpid()}.{uuid.uuid4().hex}").touch()
    while not (root / f"{name}.released").exists():
        time.sleep(_POLL_SECONDS)


class GateBoard:
    """Test side: hold, observe and release gates in one directory.

    Args:
        directory: created if missing; one board per test (use a ``tmp_path`` subdirectory).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        """Environment entries that point child processes at this board."""
        return {GATES_DIR_ENV: str(self.directory)}

    def hold(self, name: str) -> None:
        """Make handlers that reach ``name`` stop there until :meth:`release`."""
        (self.directory / f"{_checked(name)}.held").touch()

    def release(self, name: str) -> None:
        """Let every handler waiting at ``name`` (and all later ones) through."""
        (self.directory / f"{_checked(name)}.released").touch()

    def arrivals(self, name: str) -> int:
        """How many times handlers reached the held gate ``name``."""
        return sum(1 for _ in self.directory.glob(f"{_checked(name)}.arrived.*"))

    async def wait_arrived(self, name: str, count: int = 1, timeout: float = 30.0) -> None:
        """Wait until ``count`` handlers reached the held gate ``name``.

        Raises:
            ValueError: the gate is not held (nobody would ever arrive).
            TimeoutError: fewer arrivals within ``timeout`` seconds.
        """
        deadline = self._deadline(name, timeout)
        while not self._arrived(name, count, deadline, timeout):
            await asyncio.sleep(_POLL_SECONDS)

    def wait_arrived_sync(self, name: str, count: int = 1, timeout: float = 30.0) -> None:
        """Blocking :meth:`wait_arrived`, for tests without an event loop."""
        deadline = self._deadline(name, timeout)
        while not self._arrived(name, count, deadline, timeout):
            time.sleep(_POLL_SECONDS)

    def _deadline(self, name: str, timeout: float) -> float:
        if not (self.directory / f"{_checked(name)}.held").exists():
            raise ValueError(f"gate {name!r} is not held; call hold() before the handler runs")
        return time.monotonic() + timeout

    def _arrived(self, name: str, count: int, deadline: float, timeout: float) -> bool:
        arrivals = self.arrivals(name)
        if arrivals >= count:
            return True
        if time.monotonic() > deadline:
            raise TimeoutError(f"gate {name!r}: {arrivals} of {count} arrivals after {timeout}s")
        return False
