"""SQLite persistence for the local engine.

Each Flow run is one row holding a snapshot of its control state (Step executions with their
Timers and locals, counters, results), plus one row per Attribute and one per queued Channel
message, so a Step's commit rewrites the small snapshot and only the values that changed, in the
same transaction as the history events that changed them. A value too large to keep inline is
a row of ``blobs`` (its SHA-256, the serialized value) written in the same transaction as the
first row or event that refers to it, so no committed reference ever names a missing blob. A
separate ``inflight`` table records Step method attempts a Worker took (written just before the
task goes to it, removed when it declines), so a restarted engine can tell an attempt that may
have run (lost: retried per policy) from a Step that was only queued or waiting for a free Worker
(dispatched again with the same attempt).

The database runs in WAL mode. ``process-crash-safe`` durability (the default) writes every commit
to the database file before the engine acknowledges it but does not fsync, so a killed engine
loses nothing; ``fsync`` durability also survives an operating-system crash.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from dex_local_engine.exceptions import DexLocalEngineError

__all__ = [
    "Durability",
    "FlowRow",
    "HistoryRow",
    "InflightRow",
    "Store",
    "StoreError",
    "StoredMessage",
    "StoredRun",
    "ValueChanges",
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS flows (
    run_id TEXT PRIMARY KEY,
    flow_id TEXT NOT NULL,
    is_latest INTEGER NOT NULL,
    snapshot BLOB NOT NULL,
    running INTEGER NOT NULL DEFAULT 1,
    search_record BLOB
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
CREATE TABLE IF NOT EXISTS attributes (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE TABLE IF NOT EXISTS channel_messages (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    channel_name TEXT NOT NULL,
    message BLOB NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS blobs (
    blob_id TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
"""


_ADDED_FLOW_COLUMNS = {
    "running": "INTEGER NOT NULL DEFAULT 1",
    "search_record": "BLOB",
}
"""Columns of ``flows`` newer than the table: a database written before them gets them added
(its runs count as running until the engine loads them and finds them closed)."""

_MAX_QUERY_PARAMETERS = 500
"""Blob IDs per ``IN (...)`` query (SQLite allows at least 999 parameters)."""


class StoreError(DexLocalEngineError):
    """The database cannot be opened or used (the message names the file and the cause)."""


class Durability(StrEnum):
    """How hard a commit is pushed to disk before it is acknowledged."""

    PROCESS_CRASH_SAFE = "process-crash-safe"
    FSYNC = "fsync"


@dataclass(frozen=True)
class StoredMessage:
    """One queued Channel message row; ``seq`` orders a run's messages (queue order)."""

    channel_name: str
    seq: int
    message: bytes
    """A serialized ``ChannelMessage``."""


@dataclass(frozen=True)
class ValueChanges:
    """The Attribute and Channel message rows of one run to change in a commit."""

    clear_all: bool = False
    """Delete every value row of the run first (a full rewrite)."""
    clear_attributes: bool = False
    """Delete every Attribute row of the run first (the run restarted)."""
    attribute_puts: tuple[tuple[str, bytes], ...] = ()
    """``(key, serialized Value)`` rows to write."""
    attribute_deletes: tuple[str, ...] = ()
    message_puts: tuple[StoredMessage, ...] = ()
    message_deletes: tuple[tuple[str, int], ...] = ()
    """``(channel_name, seq)`` rows to delete."""

    def with_messages(
        self, puts: Sequence[StoredMessage], deletes: Sequence[tuple[str, int]]
    ) -> ValueChanges:
        """These changes plus Channel message rows to insert and delete."""
        return replace(self, message_puts=tuple(puts), message_deletes=tuple(deletes))


@dataclass(frozen=True)
class FlowRow:
    """One Flow run's snapshot and changed value rows to write."""

    run_id: str
    flow_id: str
    is_new: bool
    """A new run: earlier runs of the Flow ID stop being the latest."""
    snapshot: bytes
    values: ValueChanges = ValueChanges()
    running: bool = True
    search_record: bytes | None = None
    """For a closed run: what SearchFlows lists of it (it is no longer held in memory)."""
    on_rollback: Callable[[], None] | None = field(default=None, compare=False)
    """Called when the commit fails, so the writer forgets what it believed was written."""


@dataclass(frozen=True)
class StoredRun:
    """One Flow run's snapshot and value rows as read back."""

    run_id: str
    flow_id: str
    is_latest: bool
    snapshot: bytes
    attributes: tuple[tuple[str, bytes], ...] = ()
    messages: tuple[StoredMessage, ...] = ()
    """In queue order."""

    @property
    def has_value_rows(self) -> bool:
        """False for a run written before values had rows (its snapshot holds them) or empty."""
        return bool(self.attributes or self.messages)


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
            _add_missing_columns(connection)
        except sqlite3.Error as error:
            raise StoreError(f"cannot use database {str(path)!r}: {error}") from error
        return cls(connection)

    def close(self) -> None:
        """Close the connection; later calls fail."""
        self._db.close()

    def load_flows(self, *, running_only: bool = False) -> Iterator[StoredRun]:
        """Stored Flow runs with their Attributes and Channel messages, oldest first.

        ``running_only``: only the latest run of each Flow ID that was running when written.
        """
        where = " WHERE is_latest = 1 AND running = 1" if running_only else ""
        runs = self._db.execute(
            f"SELECT run_id, flow_id, is_latest, snapshot FROM flows{where} ORDER BY rowid"
        ).fetchall()
        for run_id, flow_id, is_latest, snapshot in runs:
            yield self._stored_run(run_id, flow_id, bool(is_latest), snapshot)

    def load_latest(self, flow_id: str) -> StoredRun | None:
        """The latest stored run of ``flow_id`` with its values, or None."""
        row = self._db.execute(
            "SELECT run_id, snapshot FROM flows WHERE flow_id = ? AND is_latest = 1",
            (flow_id,),
        ).fetchone()
        return None if row is None else self._stored_run(row[0], flow_id, True, row[1])

    def closed_search_records(self) -> Iterator[bytes]:
        """The search records of the latest runs that are closed."""
        for (record,) in self._db.execute(
            "SELECT search_record FROM flows "
            "WHERE is_latest = 1 AND running = 0 AND search_record IS NOT NULL"
        ):
            yield bytes(record)

    def mark_closed(self, run_id: str, search_record: bytes) -> None:
        """Record that a stored run is closed (for a database written before closed runs left
        memory: its rows said nothing about it)."""
        self._db.execute(
            "UPDATE flows SET running = 0, search_record = ? WHERE run_id = ?",
            (search_record, run_id),
        )

    def _stored_run(self, run_id: str, flow_id: str, is_latest: bool, snapshot: bytes) -> StoredRun:
        attributes = self._db.execute(
            "SELECT key, value FROM attributes WHERE run_id = ?", (run_id,)
        ).fetchall()
        messages = self._db.execute(
            "SELECT channel_name, seq, message FROM channel_messages WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
        return StoredRun(
            run_id,
            flow_id,
            is_latest,
            bytes(snapshot),
            tuple((key, bytes(value)) for key, value in attributes),
            tuple(StoredMessage(name, seq, bytes(message)) for name, seq, message in messages),
        )

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

    def put_blobs(self, blobs: Sequence[tuple[str, bytes]]) -> None:
        """Store ``(blob_id, serialized Value)`` rows now (one transaction; known IDs are kept)."""
        db = self._db
        db.execute("BEGIN")
        try:
            db.executemany(
                "INSERT OR IGNORE INTO blobs (blob_id, value) VALUES (?, ?)", list(blobs)
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def load_blobs(self, blob_ids: Sequence[str]) -> dict[str, bytes]:
        """The serialized Values of those of ``blob_ids`` the database holds."""
        found: dict[str, bytes] = {}
        for start in range(0, len(blob_ids), _MAX_QUERY_PARAMETERS):
            chunk = list(blob_ids[start : start + _MAX_QUERY_PARAMETERS])
            marks = ", ".join("?" * len(chunk))
            for blob_id, value in self._db.execute(
                f"SELECT blob_id, value FROM blobs WHERE blob_id IN ({marks})", chunk
            ):
                found[blob_id] = bytes(value)
        return found

    def mark_inflight(self, row: InflightRow) -> None:
        """Record that an attempt is being handed to a Worker (one small transaction)."""
        self._db.execute(
            "INSERT OR REPLACE INTO inflight (run_id, step_execution_id, method, attempt) "
            "VALUES (?, ?, ?, ?)",
            (row.run_id, row.step_execution_id, row.method, row.attempt),
        )

    def unmark_inflight(self, row: InflightRow) -> None:
        """Forget the marker of an attempt that went back to waiting without running."""
        self._db.execute(
            "DELETE FROM inflight WHERE run_id = ? AND step_execution_id = ? AND method = ? "
            "AND attempt = ?",
            (row.run_id, row.step_execution_id, row.method, row.attempt),
        )

    def commit(
        self,
        flows: list[FlowRow],
        history: list[HistoryRow],
        finished: Sequence[tuple[str, str]] = (),
        blobs: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        """Write Flow snapshots, append history and update in-flight markers atomically.

        ``blobs`` are ``(blob_id, serialized Value)`` rows the snapshots, value rows or events
        refer to (written first, so a reference never outlives a failed commit). ``finished`` lists
        ``(run_id, step_execution_id)`` whose in-flight marker is removed.
        """
        db = self._db
        db.execute("BEGIN")
        try:
            if blobs:
                db.executemany(
                    "INSERT OR IGNORE INTO blobs (blob_id, value) VALUES (?, ?)", list(blobs)
                )
            for flow in flows:
                if flow.is_new:
                    db.execute(
                        "UPDATE flows SET is_latest = 0 WHERE flow_id = ? AND run_id != ?",
                        (flow.flow_id, flow.run_id),
                    )
                db.execute(
                    "INSERT OR REPLACE INTO flows "
                    "(run_id, flow_id, is_latest, snapshot, running, search_record) "
                    "VALUES (?, ?, 1, ?, ?, ?)",
                    (
                        flow.run_id,
                        flow.flow_id,
                        flow.snapshot,
                        int(flow.running),
                        flow.search_record,
                    ),
                )
                _write_values(db, flow.run_id, flow.values)
            if history:
                db.executemany(
                    "INSERT INTO history (run_id, event_id, event) VALUES (?, ?, ?)",
                    [(row.run_id, row.event_id, row.event) for row in history],
                )
            if finished:
                db.executemany(
                    "DELETE FROM inflight WHERE run_id = ? AND step_execution_id = ?",
                    list(finished),
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            for flow in flows:
                if flow.on_rollback is not None:
                    flow.on_rollback()
            raise


def _add_missing_columns(db: sqlite3.Connection) -> None:
    present = {row[1] for row in db.execute("PRAGMA table_info(flows)")}
    for name, declaration in _ADDED_FLOW_COLUMNS.items():
        if name not in present:
            db.execute(f"ALTER TABLE flows ADD COLUMN {name} {declaration}")


def _write_values(db: sqlite3.Connection, run_id: str, changes: ValueChanges) -> None:
    if changes.clear_all:
        db.execute("DELETE FROM channel_messages WHERE run_id = ?", (run_id,))
    if changes.clear_all or changes.clear_attributes:
        db.execute("DELETE FROM attributes WHERE run_id = ?", (run_id,))
    if changes.attribute_deletes:
        db.executemany(
            "DELETE FROM attributes WHERE run_id = ? AND key = ?",
            [(run_id, key) for key in changes.attribute_deletes],
        )
    if changes.attribute_puts:
        db.executemany(
            "INSERT OR REPLACE INTO attributes (run_id, key, value) VALUES (?, ?, ?)",
            [(run_id, key, value) for key, value in changes.attribute_puts],
        )
    if changes.message_deletes:
        db.executemany(
            "DELETE FROM channel_messages WHERE run_id = ? AND seq = ?",
            [(run_id, seq) for _, seq in changes.message_deletes],
        )
    if changes.message_puts:
        db.executemany(
            "INSERT OR REPLACE INTO channel_messages (run_id, seq, channel_name, message) "
            "VALUES (?, ?, ?, ?)",
            [(run_id, row.seq, row.channel_name, row.message) for row in changes.message_puts],
        )
