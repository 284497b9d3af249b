"""Temporary directories named for the process that made them, removed once that process is gone.

A Worker (or a child it starts) that is SIGKILLed never runs its cleanup, so a temporary directory
it made would stay forever. Each directory therefore carries its process's PID in its name, and
the first directory a process makes under a prefix removes those of that prefix whose process no
longer runs.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path

__all__ = ["owned_temp_directory", "process_alive"]


def owned_temp_directory(prefix: str) -> Path:
    """A new temporary directory ``<prefix><pid>-<random>`` of this process; the first call for a
    ``prefix`` in a process removes the directories of that prefix whose process is gone.

    The caller still removes the directory when it is done; the sweep is for a process that was
    killed before it could.

    Example:
        >>> directory = owned_temp_directory("dex-agents-doc-")
        >>> directory.name.startswith(f"dex-agents-doc-{os.getpid()}-")
        True
        >>> directory.rmdir()
    """
    _remove_orphaned_directories(prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def process_alive(pid: int) -> bool:
    """Whether a process with this PID runs (another user's process counts as running).

    Example:
        >>> process_alive(os.getpid())
        True
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, and not ours to clean up after
    return True


@cache
def _remove_orphaned_directories(prefix: str) -> None:
    owned = re.compile(rf"^{re.escape(prefix)}(\d+)-")
    for entry in Path(tempfile.gettempdir()).iterdir():
        match = owned.match(entry.name)
        if match is not None and not process_alive(int(match.group(1))):
            shutil.rmtree(entry, ignore_errors=True)
