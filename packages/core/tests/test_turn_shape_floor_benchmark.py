"""The floor benchmark still runs end to end (tiny sizes; the figures are not checked)."""

from __future__ import annotations

import re

from benchmark_support import run_benchmark


def test_turn_shape_floor_runs_every_turn_of_the_session_shape() -> None:
    # Each turn checks its own end state and that it read all 8 events, or the script fails.
    done = run_benchmark(
        "turn_shape_floor.py", "--turns", "2", "--warmup", "1", "--model-latency-ms", "5"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 turns after 1 warm-up, 5 ms per model call" in done.stdout
    assert re.search(r"until the turn's last event is read, median\s+[\d.]+ ms", done.stdout)
    assert re.search(r"until the query RPC after it, median\s+[\d.]+ ms", done.stdout)
    # Both 5 ms model sleeps of a turn are counted (each Model Step adds its own).
    slept = re.search(r"model sleeps of a turn really took, median\s+([\d.]+) ms", done.stdout)
    assert slept is not None and float(slept.group(1)) >= 10.0
