"""Benchmark: does a turn cost more late in a session? Early and late turns, interleaved.

Issue 28 asks that turn 100 of a session cost at most 1.2 times turn 5. Timing one session's first
and last turns compares two moments of the machine as well (on this project's shared 2-core
machine its speed drifts by a quarter within minutes), so here two sessions run side by side: a
"late" one first taken to turn ``--late-from`` - 1, then a fresh "early" one, and the two take
turns: early turn 1, late turn ``--late-from``, early turn 2, ... (``--pairs`` of each, the order
within a pair swapped every other pair). Both see the same moments of the machine, so their
ratio holds where a single session's does not.

The same is done in process (two instances of the framework's agent, each its own history) and
durably (two sessions of one Flow on one engine and Worker child, each turn one
``AgentSessionClient.run_turn``). It prints, for the early and the late turns: the median turn,
the durable overhead (durable median less in-process median), the CPU per turn of all processes
(user + system, read from ``/proc`` around each turn; the kernel counts in ticks of 10 ms, so read
the mean over the pairs, not one turn) and the durable CPU above the in-process one, each with
its late / early ratio.

The agent is ``adapter_turns.py``'s (``adapter_agents/<runner>.py``: two model calls and one read
tool a turn)::

    uv run python benchmarks/session_growth.py --framework stepwise
    uv run python benchmarks/session_growth.py --framework langgraph --late-from 91 --pairs 10
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from adapter_agents import FINAL_PREFIX, USER_TEXT
from adapter_turns import Options as StackOptions
from adapter_turns import (
    benchmark_stack,
    growth_ratio,
    load_agent,
    process_tree_cpu_seconds,
    public_run_turn,
)

RunTurn = Callable[[str], Awaitable[str]]


@dataclass(frozen=True)
class Options:
    framework: str
    late_from: int
    pairs: int
    model_latency_ms: float


@dataclass
class Side:
    """The measured turns of one session: wall and CPU seconds of each."""

    durations: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.durations) * 1000

    @property
    def cpu_ms(self) -> float:
        return statistics.fmean(self.cpu_seconds) * 1000


@dataclass(frozen=True)
class Interleaved:
    early: Side
    late: Side


async def _timed_turn(run_turn: RunTurn, side: Side, label: str) -> None:
    cpu = process_tree_cpu_seconds()
    started = time.perf_counter()
    answer = await run_turn(USER_TEXT)
    side.durations.append(time.perf_counter() - started)
    side.cpu_seconds.append(process_tree_cpu_seconds() - cpu)
    if not answer.startswith(FINAL_PREFIX):
        raise RuntimeError(f"the {label} turn answered {answer!r}")


async def interleave(early: RunTurn, late: RunTurn, options: Options, label: str) -> Interleaved:
    """Take ``late`` to turn ``late_from`` - 1, then alternate the two for ``pairs`` turns each."""
    for turn in range(1, options.late_from):
        await late(USER_TEXT)
        if turn % 10 == 0 or turn == options.late_from - 1:
            _progress(f"{label}: late session at turn {turn}")
    measured = Interleaved(Side(), Side())
    for pair in range(options.pairs):
        order = [(early, measured.early), (late, measured.late)]
        if pair % 2:
            order.reverse()  # neither side always runs right after the other
        for run_turn, side in order:
            await _timed_turn(run_turn, side, label)
    _progress(f"{label}: {options.pairs} interleaved pairs done")
    return measured


async def measure_in_process(options: Options) -> Interleaved:
    early = load_agent(options.framework, options.model_latency_ms)
    late = load_agent(options.framework, options.model_latency_ms)
    return await interleave(early.run_in_process, late.run_in_process, options, "in-process")


async def measure_durable(options: Options, state_dir: Path) -> Interleaved:
    agent = load_agent(options.framework, options.model_latency_ms)
    stack_options = StackOptions(options.framework, options.pairs, 0, options.model_latency_ms)
    async with benchmark_stack(agent, stack_options, state_dir) as (stack, _):
        sessions = stack.sessions(agent.flow)
        early = public_run_turn(sessions, "growth-early")
        late = public_run_turn(sessions, "growth-late")
        return await interleave(early, late, options, "durable")


def print_report(options: Options, local: Interleaved, durable: Interleaved) -> None:
    early_turns = f"turns 1-{options.pairs}"
    late_turns = f"turns {options.late_from}-{options.late_from + options.pairs - 1}"
    print(
        f"session_growth: framework={options.framework} model_latency={options.model_latency_ms:g}"
        f" ms, {options.pairs} interleaved pairs, two model calls and one tool call per turn"
    )
    print(f"{'':34}{early_turns:>14}{late_turns:>16}  late/early")
    rows: list[tuple[str, float, float]] = [
        ("in-process turn (median)", local.early.median_ms, local.late.median_ms),
        ("durable turn (median)", durable.early.median_ms, durable.late.median_ms),
        (
            "durable overhead",
            durable.early.median_ms - local.early.median_ms,
            durable.late.median_ms - local.late.median_ms,
        ),
        ("in-process CPU per turn", local.early.cpu_ms, local.late.cpu_ms),
        ("durable CPU per turn", durable.early.cpu_ms, durable.late.cpu_ms),
        (
            "durable CPU above in-process",
            durable.early.cpu_ms - local.early.cpu_ms,
            durable.late.cpu_ms - local.late.cpu_ms,
        ),
    ]
    for name, early, late in rows:
        print(f"{name:<34}{early:>11.1f} ms{late:>13.1f} ms  {growth_ratio(early, late)}")
    print(f"load average: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")


async def run(options: Options) -> None:
    local = await measure_in_process(options)
    with tempfile.TemporaryDirectory(prefix="session-growth-") as state_dir:
        durable = await measure_durable(options, Path(state_dir))
    print_report(options, local, durable)


def _progress(text: str) -> None:
    print(f"... {text}", file=sys.stderr, flush=True)


def _parse(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--framework", default="stepwise", help="the runner (default stepwise)")
    parser.add_argument(
        "--late-from",
        type=int,
        default=91,
        help="the late session's first measured turn (default 91: turns 91-100 against 1-10)",
    )
    parser.add_argument("--pairs", type=int, default=10, help="turns of each session (default 10)")
    parser.add_argument(
        "--model-latency-ms", type=float, default=20.0, help="model sleep per call (default 20)"
    )
    arguments = parser.parse_args(argv)
    if arguments.pairs < 2 or arguments.late_from <= arguments.pairs:
        parser.error("--pairs must be at least 2 and --late-from above it")
    return Options(
        arguments.framework, arguments.late_from, arguments.pairs, arguments.model_latency_ms
    )


def main(argv: Sequence[str] | None = None) -> int:
    asyncio.run(run(_parse(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
