"""cProfile of a benchmark's Worker child: started in the child, collected by the parent.

The child calls ``start_cprofile(path)`` before it serves; the parent, once the turns it wants
profiled are done, calls ``collect_cprofile(pid, path)``: SIGUSR1 makes the child write its
statistics to ``path`` and the parent prints the top functions. ``session_turns.py`` and
``adapter_turns.py`` use it for ``--cprofile-worker``. With ``DEX_BENCH_CPROFILE_COPY=PATH`` in the
environment the parent also keeps the statistics at ``PATH``, for what the top list does not show
(``pstats.Stats(PATH).print_callers("deepcopy")``).
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import os
import pstats
import signal
import time
from pathlib import Path


def start_cprofile(path: Path) -> None:
    """Profile this process from now on; SIGUSR1 writes the statistics to ``path``."""
    profiler = cProfile.Profile()

    def dump(signal_number: int, frame: object) -> None:
        profiler.disable()
        partial = path.with_suffix(".partial")
        profiler.dump_stats(partial)
        os.replace(partial, path)

    signal.signal(signal.SIGUSR1, dump)
    profiler.enable()


async def collect_cprofile(pid: int, path: Path) -> str:
    """Ask a profiled child (SIGUSR1) for its cProfile statistics; the top functions as text."""
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 30
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} wrote no cProfile statistics to {path}")
        await asyncio.sleep(0.05)
    keep = os.environ.get("DEX_BENCH_CPROFILE_COPY")
    if keep:
        Path(keep).write_bytes(path.read_bytes())
    text = io.StringIO()
    stats = pstats.Stats(str(path), stream=text)
    stats.sort_stats(pstats.SortKey.CUMULATIVE).print_stats(45)
    stats.sort_stats(pstats.SortKey.TIME).print_stats(30)
    return text.getvalue()
