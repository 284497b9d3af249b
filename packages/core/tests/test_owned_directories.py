"""Temporary directories named for their process: a later process removes those of dead ones."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from dex_agents.adapters import owned_temp_directory


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_first_directory_of_a_prefix_removes_those_of_dead_processes() -> None:
    prefix = f"dex-agents-test-{uuid.uuid4().hex[:8]}-"
    temp = Path(tempfile.gettempdir())
    dead = temp / f"{prefix}{_dead_pid()}-left"
    (dead / "inside").mkdir(parents=True)
    alive = temp / f"{prefix}{os.getppid()}-kept"
    alive.mkdir()
    unnamed = temp / f"{prefix}notapid"
    unnamed.mkdir()
    try:
        made = owned_temp_directory(prefix)

        assert made.is_dir() and made.name.startswith(f"{prefix}{os.getpid()}-")
        assert not dead.exists()
        assert alive.is_dir() and unnamed.is_dir()
        # Once per process and prefix: a later directory does not sweep again.
        dead.mkdir()
        second = owned_temp_directory(prefix)
        assert dead.is_dir() and second != made
    finally:
        for directory in temp.glob(f"{prefix}*"):
            for path in sorted(directory.rglob("*"), reverse=True):
                path.rmdir()
            directory.rmdir()
