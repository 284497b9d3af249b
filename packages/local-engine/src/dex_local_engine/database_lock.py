"""One engine per database: an exclusive lock on a file beside the database.

Two engines on one SQLite file would each schedule the same Flows and overwrite each other's
snapshots. The lock is an ``flock`` held for the life of the process, so the operating system
releases it when the engine exits for any reason, SIGKILL included, and a restarted engine can
take over at once.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from dex_local_engine.store import StoreError

__all__ = ["DatabaseLock", "lock_path"]


def lock_path(database: Path) -> Path:
    """The lock file of ``database``: the same name with ``.lock`` appended."""
    return database.with_name(database.name + ".lock")


class DatabaseLock:
    """An exclusive, process-lifetime lock on a database.

    Example::

        lock = DatabaseLock.acquire(Path("engine.db"))
        ...
        lock.release()

    Raises:
        StoreError: another process holds the lock, or the lock file cannot be created.
    """

    def __init__(self, descriptor: int) -> None:
        self._descriptor: int | None = descriptor

    @classmethod
    def acquire(cls, database: Path) -> DatabaseLock:
        """Take the lock without waiting."""
        path = lock_path(database)
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise StoreError(
                f"unusable database {database}: cannot create its lock file {path}: "
                f"{error.strerror or error}"
            ) from error
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(descriptor)
            raise StoreError(
                f"unusable database {database}: another dex-local-engine is serving it "
                f"(it holds the lock file {path})"
            ) from error
        return cls(descriptor)

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None
