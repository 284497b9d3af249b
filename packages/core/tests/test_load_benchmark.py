"""``benchmarks/load.py`` still runs end to end in both modes (tiny sizes; no figure is checked
but that every turn completed and every approved write was seen running)."""

from __future__ import annotations

import re

from benchmark_support import run_benchmark


def _run(*arguments: str) -> str:
    done = run_benchmark("load.py", "--model-latency-ms", "5", *arguments)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_load_mode_runs_sessions_over_two_workers_and_prints_every_figure() -> None:
    out = _run(
        "--sessions", "4", "--workers", "2", "--turns", "2", "--approval-delay-ms", "20",
        "--count-messages",
    )  # fmt: skip
    row = next(line for line in out.splitlines() if line.startswith("4 "))
    cells = [cell.strip() for cell in row.split("|")]
    assert cells[1:3] == ["2 x 8", "8 (0)"], row
    # Every approved write was matched to the moment a Worker started it.
    assert re.fullmatch(r"\d+ / \d+ ms", cells[4]) and re.fullmatch(r"\d+ / \d+ ms", cells[5])
    assert "ms/turn" in cells[6] and "MiB" in cells[9] and "waiting peak" in cells[10], row
    assert re.search(r"engine messages .*: [\d.]+ tasks offered, [\d.]+ declined per turn", out)


def test_the_parked_mode_finds_the_waiting_sessions_and_approves_them_at_once() -> None:
    out = _run("--parked", "4", "--approve-at-once", "3", "--idle-seconds", "0.2")
    assert re.search(r"sessions parked on an approval\s+\| 4 of 4 in", out), out
    assert re.search(r"every page of 1000\s+\| 4 found in \d+ ms", out), out
    assert re.search(r"first page of 50\s+\| 4 in \d+ ms", out), out
    assert re.search(r"their turns ended\s+\| all in [\d.]+ s, 0 failed", out), out
    assert re.search(r"approval -> write running p50/p99\s+\| \d+ / \d+ ms", out), out
