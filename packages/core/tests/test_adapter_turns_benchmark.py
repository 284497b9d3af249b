"""adapter_turns.py still runs end to end for Stepwise (tiny sizes; the figures are not checked)."""

from __future__ import annotations

import re
import subprocess
from functools import partial

from benchmark_support import run_benchmark

_run = partial(run_benchmark, "adapter_turns.py")


def _run_stepwise(*arguments: str, warmup: int = 0) -> subprocess.CompletedProcess[str]:
    """Two Stepwise turns of 5 ms model calls after ``warmup``, with ``arguments`` added."""
    turns = ("--turns", "2", "--warmup", str(warmup), "--model-latency-ms", "5")
    return _run("--framework", "stepwise", *turns, *arguments)


def test_adapter_turns_times_durable_and_in_process_turns_of_stepwise() -> None:
    # Each durable turn checks its snapshot's answer, or the script fails.
    done = _run_stepwise("--cprofile-worker")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "framework=stepwise model_latency=5 ms turns=2" in done.stdout
    ratio = re.search(r"RATIO durable/in-process: ([\d.]+)", done.stdout)
    # The ratio is printed; which of two wall times is longer is left to the machine.
    assert ratio is not None and float(ratio.group(1)) > 0
    assert re.search(r"durable CPU per turn \(Worker\) +[\d.]+ ms", done.stdout)
    # The Worker child's profile, collected after the turns.
    profile = done.stdout.partition("Worker child cProfile over the durable turns:")[2]
    assert re.search(r"\d+ function calls", profile)


def test_the_read_write_shape_runs_peers_turn() -> None:
    # Each turn ends with the script's final answer (checked by the script), after both tools.
    done = _run_stepwise("--shape", "read-write")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "three model calls and two tool calls" in done.stdout
    assert re.search(r"durable CPU per turn \(Worker\) +[\d.]+ ms", done.stdout)


def test_count_messages_prints_the_engines_messages_of_the_measured_turns() -> None:
    done = _run_stepwise("--count-messages", warmup=1)
    assert done.returncode == 0, done.stderr[-3000:]
    counted = done.stdout.partition("engine messages per turn")[2]
    # Two model calls, so two RunModel tasks at least; a client that follows the turn reads.
    execute = re.search(r"frame out task execute +([\d.]+) +([\d.]+) KiB each", counted)
    assert execute is not None and float(execute.group(1)) >= 2 and float(execute.group(2)) > 0
    reads = re.search(r"call ReadStream +([\d.]+)", counted)
    assert reads is not None and float(reads.group(1)) >= 1
    # The warm-up turn, which starts the session, is not counted.
    assert "call StartFlow" not in counted


def test_an_unknown_shape_names_the_known_ones() -> None:
    done = _run("--shape", "write-only")
    assert done.returncode != 0
    assert "read-write" in done.stderr


def test_an_unknown_framework_names_the_known_ones() -> None:
    done = _run("--framework", "no-such-framework")
    assert done.returncode != 0
    assert "cannot load the benchmark agent of 'no-such-framework'" in done.stderr
    assert "stepwise" in done.stderr
