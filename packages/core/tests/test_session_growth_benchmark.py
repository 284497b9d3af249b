"""session_growth.py still runs end to end for Stepwise (tiny sizes; the figures are not checked)."""

from __future__ import annotations

import re
from functools import partial

from benchmark_support import run_benchmark

_run = partial(run_benchmark, "session_growth.py")


def test_session_growth_interleaves_early_and_late_turns_of_two_sessions() -> None:
    # Every turn's answer is checked by the script; a durable turn that did not finish fails it.
    done = _run(
        "--framework", "stepwise", "--late-from", "4", "--pairs", "2", "--model-latency-ms", "5"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "framework=stepwise model_latency=5 ms, 2 interleaved pairs" in done.stdout
    assert re.search(r"turns 1-2 +turns 4-5 +late/early", done.stdout)
    for row in ("durable overhead", "durable CPU per turn", "durable CPU above in-process"):
        assert re.search(rf"{row} +-?[\d.]+ ms +-?[\d.]+ ms +([\d.]+x|-)", done.stdout), row
    # Both sides took the late session to turn 3 before the pairs.
    assert done.stderr.count("late session at turn 3") == 2
    assert "durable: 2 interleaved pairs done" in done.stderr


def test_a_late_start_inside_the_early_turns_is_refused() -> None:
    done = _run("--late-from", "3", "--pairs", "5")
    assert done.returncode != 0
    assert "--late-from above it" in done.stderr
