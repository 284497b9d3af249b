"""SQLite persistence for the local engine.

Each Flow run is one row holding a snapshot of its whole state (Attributes, Channel messages,
Step executions with their Timers and locals, results), rewritten in the same transaction as the
history events that changed it. A separate ``inflight`` table records Step method attempts that
were handed to a dispatcher, so a restarted engine can tell an attempt that may have run (lost:
retried per policy) from a Step that was only queued (dispatched again with the same attempt).

The database runs in WAL mode. ``process-crash-safe`` durability (the default) writes every commit
to the database file before the engine acknowledges it but does not fsync, so a killed engine
loses nothing; ``fsync`` durability also survives an operating-system crash.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

__all__ = [
    "Durability",
    "FlowRow",
    "HistoryRow",
    "InflightRow",
    "Store",
    "StoreError",
    "StoredRun",
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS flows (
    run_id TEXT PRIMARY KEY,
    flow_id TEXT NOT NULL,
    is_latest INTEGER NOT NULL,
    snapshot BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS flows_by_id ON flows (flow_id, is_latest);
CREATE TABLE IF NOT EXISTS history (
    run_id TEXT NOT NULL,
    event_id INTEGER NOT NULL,
    event BLOB NOT NULL,
    PRIMARY KEY (run_id, event_id)
);
CREATE TABLE IF NOT EXISTS inflight (
    run_id TEXT NOT NULL,
    step_execution_id TEXT NOT NULL,
    method TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    PRIMARY KEY (run_id, step_execution_id)
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
"""


class StoreError(Exception):
    """The database cannot be opened or used (the message names the file and the cause)."""


class Durability(StrEnum):
    """How hard a commit is pushed to disk before it is acknowledged."""

    PROCESS_CRASH_SAFE = "process-crash-safe"
    FSYNC = "fsync"


@dataclass(frozen=True)
class FlowRow:
    """One Flow run's snapshot to write."""

    run_id: str
    flow_id: str
    is_new: bool
    """A new run: earlier runs of the Flow ID stop being the latest."""
    snapshot: bytes


@dataclass(frozen=True)
class StoredRun:
    """One Flow run's snapshot as read back."""

    run_id: str
    flow_id: str
    is_latest: bool
    snapshot: bytes


@dataclass(frozen=True)
class HistoryRow:
    """One serialized ``FlowHistoryEvent`` of a run."""

    run_id: str
    event_id: int
    event: bytes


@dataclass(frozen=True)
class InflightRow:
    """A Step method attempt handed to a dispatcher and not yet finished."""

    run_id: str
    step_execution_id: str
    method: str
    attempt: int


class Store:
    """The engine's SQLite database.

    Example::

        store = Store.open(Path("engine.db"), Durability.PROCESS_CRASH_SAFE)
        store.commit([FlowRow("run-1", "flow-1", True, b"...")], [])

    Raises:
        StoreError: when the file cannot be opened, is not a database, or is locked.
    """

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._db = connection

    @classmethod
    def open(cls, path: Path, durability: Durability) -> Store:
        """Open (creating if needed) the database at ``path``."""
        try:
            connection = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
            connection.execute("PRAGMA journal_mode=WAL")
            synchronous = "FULL" if durability is Durability.FSYNC else "OFF"
            connection.execute(f"PRAGMA synchronous={synchronous}")
            connection.execute("PRAGMA busy_timeout=2000")
            connection.executescript(_SCHEMA)
        except sqlite3.Error as error:
            raise StoreError(f"cannot use database {str(path)!r}: {error}") from error
        return cls(connection)

    def close(self) -> None:
        """Close the connection; later calls fail."""
        self._db.close()

    def load_flows(self) -> Iterator[StoredRun]:
        """Every stored Flow run, oldest first."""
        for run_id, flow_id, is_latest, snapshot in self._db.execute(
            "SELECT run_id, flow_id, is_latest, snapshot FROM flows ORDER BY rowid"
        ):
            yield StoredRun(run_id, flow_id, bool(is_latest), snapshot)

    def load_inflight(self) -> list[InflightRow]:
        """Attempts that were in flight when the engine last stopped."""
        return [
            InflightRow(*row)
            for row in self._db.execute(
                "SELECT run_id, step_execution_id, method, attempt FROM inflight"
            )
        ]

    def history(self, run_id: str, from_event_id: int, limit: int) -> list[HistoryRow]:
        """History events of a run with ``event_id >= from_event_id``, at most ``limit``."""
        return [
            HistoryRow(run_id, event_id, event)
            for event_id, event in self._db.execute(
                "SELECT event_id, event FROM history WHERE run_id = ? AND event_id >= ? "
                "ORDER BY event_id LIMIT ?",
                (run_id, from_event_id, limit),
            )
        ]

    def get_meta(self, key: str) -> bytes | None:
        """A stored engine-wide value (e.g. Attribute index definitions)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else bytes(row[0])

    def set_meta(self, key: str, value: bytes) -> None:
        """Store an engine-wide value."""
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def mark_inflight(self, row: InflightRow) -> None:
        """Record that an attempt is being handed to a Worker (one small transaction)."""
        self._db.execute(
            "INSERT OR REPLACE INTO inflight (run_id, step_execution_id, method, attempt) "
            "VALUES (?, ?, ?, ?)",
            (row.run_id, row.step_execution_id, row.method, row.attempt),
        )

    def commit(
        self,
        flows: list[FlowRow],
        history: list[HistoryRow],
        finished: Sequence[tuple[str, str]] = (),
        dispatching: Sequence[InflightRow] = (),
    ) -> None:
        """Write Flow snapshots, append history and update in-flight markers atomically.

        ``finished`` lists ``(run_id, step_execution_id)`` whose in-flight marker is removed;
        ``dispatching`` lists attempts about to be handed to Workers (marked after the removals),
        so a Step's whole hot path stays one transaction.
        """
        db = self._db
        db.execute("BEGIN")
        try:
            for flow in flows:
                if flow.is_new:
                    db.execute(
                        "UPDATE flows SET is_latest = 0 WHERE flow_id = ? AND run_id != ?",
                        (flow.flow_id, flow.run_id),
                    )
                db.execute(
                    "INSERT OR REPLACE INTO flows (run_id, flow_id, is_latest, snapshot) "
                    "VALUES (?, ?, 1, ?)",
                    (flow.run_id, flow.flow_id, flow.snapshot),
                )
            db.executemany(
                "INSERT INTO history (run_id, event_id, event) VALUES (?, ?, ?)",
                [(row.run_id, row.event_id, row.event) for row in history],
            )
            if finished:
                db.executemany(
                    "DELETE FROM inflight WHERE run_id = ? AND step_execution_id = ?",
                    list(finished),
                )
            if dispatching:
                db.executemany(
                    "INSERT OR REPLACE INTO inflight "
                    "(run_id, step_execution_id, method, attempt) VALUES (?, ?, ?, ?)",
                    [(r.run_id, r.step_execution_id, r.method, r.attempt) for r in dispatching],
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
