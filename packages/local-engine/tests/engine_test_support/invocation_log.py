"""A log of real handler runs, shared by every process of a test.

Handlers call :func:`record_invocation`; the test reads the log with :class:`InvocationLog` to
count how often a handler really ran (for example: a write ran once despite a Worker crash). The
log file reaches Worker child processes through ``DEX_TEST_INVOCATION_LOG``; without it,
:func:`record_invocation` does nothing.

Example::

    record_invocation("Charge", order="o-1", attempt=context.attempt)   # in the handler
    assert invocation_log.count("Charge") == 1                          # in the test
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

INVOCATION_LOG_ENV = "DEX_TEST_INVOCATION_LOG"

JsonScalar = str | int | float | bool | None


def record_invocation(name: str, **details: JsonScalar) -> None:
    """Append one line for a handler run: its name, the process ID and ``details``."""
    path = os.environ.get(INVOCATION_LOG_ENV)
    if not path:
        return
    line = json.dumps({"name": name, "pid": os.getpid(), **details}, sort_keys=True) + "\n"
    # One O_APPEND write per line keeps lines whole when processes write concurrently.
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line.encode("utf-8"))
    finally:
        os.close(descriptor)


@dataclass(frozen=True)
class Invocation:
    """One recorded handler run."""

    name: str
    pid: int
    details: dict[str, JsonScalar]


class InvocationLog:
    """Test side: read the invocation log at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def env(self) -> dict[str, str]:
        """Environment entries that make child processes record into this log."""
        return {INVOCATION_LOG_ENV: str(self.path)}

    def entries(self, name: str | None = None) -> list[Invocation]:
        """All recorded runs, oldest first, optionally only those named ``name``."""
        if not self.path.exists():
            return []
        result = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            entry = Invocation(record.pop("name"), record.pop("pid"), record)
            if name is None or entry.name == name:
                result.append(entry)
        return result

    def count(self, name: str) -> int:
        """How many runs of ``name`` were recorded."""
        return len(self.entries(name))
