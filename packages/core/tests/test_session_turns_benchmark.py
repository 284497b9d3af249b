"""``benchmarks/session_turns.py``: its ``run_turn`` completion and ``--count-messages`` budget."""

from __future__ import annotations

import re

from benchmark_support import run_benchmark


def _per_turn(stdout: str) -> dict[str, tuple[float, float | None]]:
    """The ``--count-messages`` rows: kind -> (per turn, KiB each or None)."""
    section = stdout.split("engine messages per measured turn", 1)[1].split("\n\n", 1)[0]
    rows: dict[str, tuple[float, float | None]] = {}
    for line in section.splitlines()[1:]:
        match = re.match(r"\s+(\S.*?)\s{2,}([\d.]+)(?:\s+([\d.]+) KiB each)?$", line)
        if match:
            size = float(match.group(3)) if match.group(3) else None
            rows[match.group(1)] = (float(match.group(2)), size)
    return rows


def test_a_turn_run_with_run_turn_moves_no_transcript_back_through_the_rpcs() -> None:
    # Every turn's answer is checked by the script (the TurnResult's text and status).
    done = run_benchmark(
        "session_turns.py",
        "--turns", "3", "--warmup", "1", "--sessions", "1", "--duration", "0.2",
        "--model-latency-ms", "5", "--count-messages",
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "completion: AgentSessionClient.run_turn" in done.stdout
    rows = _per_turn(done.stdout)
    # A Stepwise turn with one tool: 2 model calls and a tool call run as Step methods.
    assert rows["frame out task execute"][0] >= 4
    # One send_user_message and at least one read of the turn's end per turn, each answering
    # a small result (a snapshot would carry the transcript: tens of KiB by the fourth turn).
    invocations = rows["frame out task rpc"][0]
    assert invocations >= 2
    result_kib = rows["frame in rpc"][1]
    assert result_kib is not None and result_kib < 4
    # run_turn follows the turn on the AgentEvents Stream: a ReadStream per event (and one more
    # for each long poll that timed out on a busy machine).
    assert rows["call ReadStream"][0] >= rows["frame in execute stream_write"][0] > 0
