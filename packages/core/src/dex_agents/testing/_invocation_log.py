"""An append-only log of real tool and model calls, shared by Worker processes."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dex_agents.exceptions import ConfigurationError


@dataclass(frozen=True)
class InvocationRecord:
    """One real call: what ran, its key (such as an idempotency key), and which process.

    Attributes:
        name: What ran, such as a tool name or ``"model"``.
        key: A detail to compare across calls; empty when none was given.
        process_id: The process that made the call.
    """

    name: str
    key: str
    process_id: int


class InvocationLog:
    """Counts real tool and model calls across Worker processes and crashes.

    Each ``record`` appends one JSON line under an exclusive ``flock``, so
    concurrent appends from parallel Steps and several processes never merge,
    and a record written before a SIGKILL stays. The file lives in the test's
    state directory; the Worker child and the test open the same path.

    Example:
        >>> log = InvocationLog(tmp_path / "invocations.jsonl")
        >>> log.record("refund_order", key="session-42/turn-1/call-1")
        >>> log.count("refund_order")
        1
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def record(self, name: str, key: str = "") -> None:
        """Append one call of ``name`` (Worker side).

        Raises:
            ConfigurationError: ``name`` is empty.
        """
        if not name:
            raise ConfigurationError("an invocation needs a non-empty name")
        line = json.dumps({"name": name, "key": key, "process_id": os.getpid()}) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked(os.O_WRONLY | os.O_CREAT | os.O_APPEND) as descriptor:
            os.write(descriptor, line.encode())

    def records(self, name: str | None = None) -> list[InvocationRecord]:
        """Every recorded call, oldest first; only those of ``name`` when given."""
        if not self.path.exists():
            return []
        with self._locked(os.O_RDONLY) as descriptor, os.fdopen(os.dup(descriptor)) as file:
            entries = [json.loads(line) for line in file if line.strip()]
        return [
            InvocationRecord(entry["name"], entry["key"], entry["process_id"])
            for entry in entries
            if name is None or entry["name"] == name
        ]

    def count(self, name: str) -> int:
        """How many times ``name`` really ran, across every process."""
        return len(self.records(name))

    def keys(self, name: str) -> list[str]:
        """The keys recorded with each call of ``name``, oldest first."""
        return [record.key for record in self.records(name)]

    @contextmanager
    def _locked(self, flags: int) -> Iterator[int]:
        descriptor = os.open(self.path, flags, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH if flags == os.O_RDONLY else fcntl.LOCK_EX)
            yield descriptor
        finally:
            os.close(descriptor)
