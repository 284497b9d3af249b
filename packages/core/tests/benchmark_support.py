"""Running a script of the repository's ``benchmarks/`` as a user would, for its smoke tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS_DIR = Path(__file__).resolve().parents[3] / "benchmarks"


def run_benchmark(
    script: str, *arguments: str, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """Run ``benchmarks/<script>`` with ``arguments`` in a child process; its output as text.

    The exit code is the caller's to check: some tests expect a refusal.
    """
    return subprocess.run(
        [sys.executable, str(BENCHMARKS_DIR / script), *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
