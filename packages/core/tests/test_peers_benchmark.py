"""peers.py still runs end to end without the peers group (tiny sizes; figures not checked)."""

from __future__ import annotations

import importlib.util
import re
from functools import partial

import pytest
from benchmark_support import run_benchmark

_run = partial(run_benchmark, "peers.py")


def _row(stdout: str, name: str) -> list[str]:
    line = next(line for line in stdout.splitlines() if line.startswith(name + " "))
    return re.split(r"\s{2,}", line.strip())


def _check_overhead(overhead: str, median: str, reference: str) -> None:
    """The overhead column is the row's median minus the reference row's, as printed (0.1 ms)."""
    assert abs(float(overhead) - (float(median) - float(reference))) <= 0.11


def test_peers_times_the_baseline_and_dex_agents_read_write_turn() -> None:
    # Every turn's answer is checked by the script; a durable turn that did not finish fails it.
    done = _run(
        "--only", "baseline,dex-agents", "--turns", "2", "--warmup", "0", "--model-latency-ms", "5"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "3 model calls + 2 tool calls (read, write) per turn" in done.stdout
    baseline, ours = _row(done.stdout, "baseline"), _row(done.stdout, "dex-agents")
    # Columns: name, median ms, CPU ms per turn, overhead above the baseline, above its own
    # framework, ratio to ours, same-framework ratio. Three model sleeps of 5 ms each: > 15 ms.
    # Which of two wall times is longer is left to the machine: only the arithmetic is checked.
    assert float(ours[1]) > 15.0 and float(baseline[1]) > 15.0
    # The engine and the Worker child work for the durable turn too: it costs more CPU.
    # (The baseline's own CPU can round to 0.0 ms a turn at a 5 ms model: only ours must show.)
    assert float(ours[2]) > float(baseline[2]) >= 0
    _check_overhead(ours[3], ours[1], baseline[1])
    assert ours[5] == ("1.00" if float(ours[3]) > 0 else "n/a")
    assert "stepwise: durable turn 2:" in done.stderr


def test_peers_runs_the_openai_agents_and_google_adk_read_write_turns_in_process_and_durable() -> (
    None
):
    names = ("openai-agents", "dex-agents-openai-agents", "google-adk", "dex-agents-google-adk")
    done = _run(
        "--only", ",".join(names), "--turns", "2", "--warmup", "0", "--model-latency-ms", "5"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for framework in ("openai-agents", "google-adk"):
        in_process, ours = (
            _row(done.stdout, framework),
            _row(done.stdout, f"dex-agents-{framework}"),
        )
        # Three model sleeps of 5 ms each; the engine and the Worker child cost CPU on top.
        assert float(ours[1]) > 15.0 and float(in_process[1]) > 15.0
        assert float(ours[2]) > float(in_process[2])
        # Its overhead above its own framework, and the same-framework ratio to itself (a wall
        # time the machine decides: on a busy machine the durable median can even be shorter).
        _check_overhead(ours[4], ours[1], in_process[1])
        assert ours[6] == ("1.00" if float(ours[4]) > 0 else "n/a")
        assert f"{framework}: durable turn 2:" in done.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("dbos") is not None, reason="the peers group is installed here"
)
def test_a_peer_without_the_peers_group_is_skipped_with_the_install_command() -> None:
    done = _run("--only", "dbos", "--turns", "2", "--warmup", "0", "--model-latency-ms", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert _row(done.stdout, "dbos")[1] == "skipped"
    assert "uv sync --all-packages --group peers" in done.stdout


def test_an_unknown_contestant_names_the_known_ones() -> None:
    done = _run("--only", "baseline,no-such-peer")
    assert done.returncode != 0
    assert "unknown contestant no-such-peer" in done.stderr
    assert "langgraph-sqlite" in done.stderr
