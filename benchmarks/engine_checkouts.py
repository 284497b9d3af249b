"""Run ``dex-local-engine serve`` from this checkout or from another git revision, and read its RSS.

Benchmarks that compare engines (``turn_shape_floor_ab.py``, ``engine_memory.py --engine-ref``)
start each engine process themselves: this checkout's engine is the console script of this
environment; another revision's engine is its ``packages/local-engine/src`` exported with
``git archive`` into a scratch directory and put first on ``PYTHONPATH``, so both run in the same
Python with the same SDK and gRPC, and only the engine's code differs.

Example::

    source = export_engine_source("main", scratch)
    engine = await start_engine(engine_command(source), scratch / "main.db", scratch / "main-logs")
    ...
    await engine.stop()
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "EngineCommand",
    "RunningEngine",
    "engine_command",
    "export_engine_source",
    "rss_bytes",
    "start_engine",
]

_READY_LINE: Final = re.compile(r"dex-local-engine ready on (\S+)")
_REPOSITORY: Final = Path(__file__).resolve().parents[1]
_ENGINE_SOURCE: Final = "packages/local-engine/src"
_START_TIMEOUT_SECONDS: Final = 60.0


@dataclass(frozen=True)
class EngineCommand:
    """How to run one engine: the command and the extra environment it needs."""

    label: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


_ENGINE_MAIN: Final = "import sys; from dex_local_engine.cli import main; sys.exit(main())"


def engine_command(source: Path | None, label: str = "") -> EngineCommand:
    """This environment's engine (``source`` None), or the engine package at ``source``.

    Both start the same way (this Python, ``dex_local_engine.cli``), so they compare fairly.
    """
    argv = (sys.executable, "-c", _ENGINE_MAIN)
    if source is None:
        return EngineCommand(label or "this checkout", argv)
    return EngineCommand(label or str(source), argv, (("PYTHONPATH", str(source)),))


def export_engine_source(revision: str, into: Path) -> Path:
    """Export ``packages/local-engine/src`` of git ``revision`` under ``into``; returns its path.

    Raises:
        subprocess.CalledProcessError: ``revision`` is not a revision of this repository.
    """
    into.mkdir(parents=True, exist_ok=True)
    archive = into / "engine-source.tar"
    with archive.open("wb") as out:
        subprocess.run(
            ["git", "-C", str(_REPOSITORY), "archive", revision, _ENGINE_SOURCE],
            stdout=out,
            check=True,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    return into / _ENGINE_SOURCE


@dataclass
class RunningEngine:
    """A started engine process and where it serves."""

    process: subprocess.Popen[bytes]
    address: str
    database: Path
    command: EngineCommand

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 seconds."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(self.process.wait, 10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                await asyncio.to_thread(self.process.wait)

    def rss_bytes(self) -> int:
        """The engine process's resident set size now."""
        return rss_bytes(self.process.pid)


async def start_engine(
    command: EngineCommand,
    database: Path,
    log_dir: Path,
    *extra_args: str,
    address: str = "127.0.0.1:0",
) -> RunningEngine:
    """Start ``command`` serving ``database`` and wait for its ready line.

    Raises:
        RuntimeError: The engine exited or printed no ready line within 60 seconds.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = log_dir / "engine.stdout.log", log_dir / "engine.stderr.log"
    argv = [*command.argv, "serve", "--address", address, "--database", str(database), *extra_args]
    with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            argv, stdout=stdout, stderr=stderr, env={**os.environ, **dict(command.env)}
        )
    deadline = time.monotonic() + _START_TIMEOUT_SECONDS
    while True:
        ready = _READY_LINE.search(stdout_path.read_text(errors="replace"))
        if ready is not None:
            return RunningEngine(process, ready.group(1), database, command)
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(
                f"engine {command.label} did not start: {stderr_path.read_text(errors='replace')}"
            )
        await asyncio.sleep(0.02)


def rss_bytes(pid: int) -> int:
    """The resident set size of process ``pid`` (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"process {pid} reports no VmRSS")
