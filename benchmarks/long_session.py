"""Benchmark: one 2,000-turn Stepwise session with compaction and retention.

The session is ``dex_agents.testing.ContextWindowSessionScenario``: a Stepwise agent with a
``ScriptedModelClient`` (no model latency) and one READ tool that every tenth turn calls twice, run
past a 4,000-token context window, so it compacts every few turns, with the default storage
options (window 64, chunks of 32, ``retained_message_limit`` 1,000). A real ``dex-local-engine``
process serves it; the Worker runs in this process. Every ``--sample-turns`` turns it prints the
wall time, turns per second over the last interval and overall, the Flow state size (bytes of every
stored Attribute, read through FlowService ``GetAttributes``), the kept messages, and the summary
generation. At the end it prints how much the state size varied once retention started deleting
messages (goal: within 10% after retention starts; whole 2,000 turns in under 3 minutes on 2 cores).

Run from the repository root::

    uv run python benchmarks/long_session.py
    uv run python benchmarks/long_session.py --turns 800 --retained-message-limit 100
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from dex_agents.testing import (
    ContextWindowProgress,
    ContextWindowSessionScenario,
    build_stepwise_context_window_flow,
)


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2_000)
    parser.add_argument("--sample-turns", type=int, default=200)
    parser.add_argument("--retained-message-limit", type=int, default=1_000)
    parser.add_argument("--context-window-tokens", type=int, default=4_000)
    return parser.parse_args()


class _Printer:
    def __init__(self) -> None:
        self._previous: ContextWindowProgress | None = None
        print(
            f"{'turns':>6} {'wall s':>8} {'turns/s':>8} {'avg t/s':>8} {'state bytes':>12} "
            f"{'kept msgs':>9} {'deleted<':>9} {'summaries':>9}",
            flush=True,
        )

    def __call__(self, progress: ContextWindowProgress) -> None:
        previous = self._previous
        interval_turns = progress.turns - (previous.turns if previous else 0)
        interval_seconds = progress.elapsed_seconds - (previous.elapsed_seconds if previous else 0)
        print(
            f"{progress.turns:>6} {progress.elapsed_seconds:>8.1f} "
            f"{interval_turns / interval_seconds:>8.1f} "
            f"{progress.turns / progress.elapsed_seconds:>8.1f} {progress.state_bytes:>12} "
            f"{progress.kept_messages:>9} {progress.deleted_before_sequence or '-':>9} "
            f"{progress.summary_generation:>9}",
            flush=True,
        )
        self._previous = progress


async def _main(arguments: argparse.Namespace) -> None:
    scenario = ContextWindowSessionScenario(
        turns=arguments.turns,
        retained_message_limit=arguments.retained_message_limit,
        context_window_tokens=arguments.context_window_tokens,
        batch_turns=arguments.sample_turns,
        turn_timeout_seconds=5.0,
    )
    with tempfile.TemporaryDirectory(prefix="long-session-") as directory:
        report = await scenario.run(
            build_stepwise_context_window_flow, Path(directory), on_progress=_Printer()
        )
    retained = report.retained_state_bytes
    print(
        f"\n{report.turns} turns in {report.elapsed_seconds:.1f} s "
        f"({report.turns / report.elapsed_seconds:.1f} turns/s); "
        f"{report.model.model_calls} model calls, {report.model.summary_calls} summary calls; "
        f"largest model input {report.model.max_input_tokens} of "
        f"{arguments.context_window_tokens} tokens"
    )
    if retained:
        spread = (max(retained) - min(retained)) / min(retained)
        print(
            f"state after retention started: {min(retained)}..{max(retained)} bytes "
            f"(spread {spread:.1%} of the smallest, {len(retained)} samples)"
        )
    else:
        print("retention never deleted a message: run more turns to see the bounded state")
    report.check()


if __name__ == "__main__":
    asyncio.run(_main(_parse()))
