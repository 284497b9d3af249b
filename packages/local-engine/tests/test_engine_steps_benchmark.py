"""The engine benchmark still runs end to end (tiny sizes; the figures are not checked)."""

from __future__ import annotations

import re

from benchmark_support import run_benchmark


def test_engine_steps_benchmark_prints_both_measurements() -> None:
    done = run_benchmark("engine_steps.py", "--steps", "5", "--flows", "2", "--long-steps", "50")
    assert done.returncode == 0, done.stderr[-3000:]
    figures = r"\d+ Steps in [\d.]+ s = [\d,]+ Steps/s; Step round trip p50 [\d.]+ ms"
    for mode in ("process-crash-safe", "fsync"):
        assert f"[{mode}]" in done.stdout
    assert len(re.findall(rf"sequential \(1 Flow\):\s+5 {figures[4:]}", done.stdout)) == 2
    assert len(re.findall(rf"aggregate \(2 Flows\): 10 {figures[4:]}", done.stdout)) == 2
    assert "long-lived (1 Flow, 50 Steps, ~1 MB of Attributes):" in done.stdout
    assert re.search(r"Steps +1- +50: mean round trip [\d.]+ ms, engine CPU", done.stdout)
