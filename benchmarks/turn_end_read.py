"""Benchmark: a turn's end read from the window alone against one that loads the whole transcript.

``run_turn`` and ``wait_for_turn`` end a completed turn with one page of the turn's own messages.
``list_agent_messages`` (the read before) loads the window and every kept chunk, so its task grows
with the session; the internal ``list_recent_agent_messages`` (the read now) loads the window
alone and answers the same page. This script runs one Stepwise session of ``--turns`` turns
(``session_turns.py``'s agent: 4 stored messages a turn), then reads the last turn's page both
ways, alternating the two in each round, and prints what one read costs each process in CPU and
its round trip: medians over ``--rounds`` rounds of ``--calls`` reads each. Both pages are checked
to be the same.

Usage (from the repository root)::

    uv run python benchmarks/turn_end_read.py [--turns 190] [--rounds 5] [--calls 40]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from adapter_turns import process_tree_cpu_seconds
from dex import AsyncClient
from dex_agents import AgentSessionFlow, ListAgentMessagesRequest
from dex_agents.testing import SERVER_ADDRESS_ENV, AgentTestStack, run_agent_worker
from session_turns import build_flow

_WORKER_MODULE: Final = "turn_end_read"
_BENCHMARK_DIR: Final = Path(__file__).resolve().parent
_WORKER_ENV: Final = "DEX_AGENTS_BENCHMARK_TURN_END_READ"
_MODEL_LATENCY_MS: Final = 1.0
_SESSION: Final = "end-read-session"
_MESSAGES_PER_TURN: Final = 4  # the user message, the tool call, its result, the answer
_PROCESSES: Final = ("engine", "Worker", "client")


@dataclass(frozen=True)
class _Read:
    """One way to read the last turn's page."""

    name: str
    call: Callable[[], Awaitable[object]]


@dataclass(frozen=True)
class _Round:
    """What one read cost on average over one round: CPU ms per process, median round trip."""

    cpu_ms: dict[str, float]
    round_trip_ms: float


async def _run_turns(stack: AgentTestStack, flow: AgentSessionFlow, turns: int) -> None:
    sessions = stack.sessions(flow)
    for number in range(1, turns + 1):
        result = await sessions.run_turn(_SESSION, "Where is order 7?", timeout=60)
        if not result.completed:
            raise RuntimeError(f"turn {number} ended {result.status}: {result.error}")
        if number % 20 == 0 or number == turns:
            print(f"  {number}/{turns} turns", file=sys.stderr, flush=True)


def _reads(client: AsyncClient, flow: AgentSessionFlow, after: int) -> tuple[_Read, _Read]:
    request = ListAgentMessagesRequest(after_sequence=after, limit=200)
    return (
        _Read(
            "list_agent_messages (window and every chunk)",
            lambda: client.invoke_rpc(flow.list_agent_messages, _SESSION, request),
        ),
        _Read(
            "list_recent_agent_messages (window only)",
            lambda: client.invoke_rpc(flow.list_recent_agent_messages, _SESSION, request),
        ),
    )


async def _measure_round(read: _Read, calls: int, pids: dict[str, int]) -> _Round:
    def cpu() -> dict[str, float]:
        # The engine and the Worker are children of this process: its own CPU is process_time.
        return {
            "engine": process_tree_cpu_seconds(pids["engine"]),
            "Worker": process_tree_cpu_seconds(pids["Worker"]),
            "client": time.process_time(),
        }

    started = cpu()
    round_trips: list[float] = []
    for _ in range(calls):
        begun = time.perf_counter()
        await read.call()
        round_trips.append(time.perf_counter() - begun)
    ended = cpu()
    return _Round(
        {name: 1000 * (ended[name] - started[name]) / calls for name in _PROCESSES},
        1000 * statistics.median(round_trips),
    )


async def _measure(turns: int, rounds: int, calls: int) -> None:
    flow = build_flow(_MODEL_LATENCY_MS)
    with tempfile.TemporaryDirectory(prefix="dex-turn-end-read-") as scratch:
        async with AgentTestStack(
            Path(scratch),
            [flow],
            _WORKER_MODULE,
            worker_cwd=_BENCHMARK_DIR,
            worker_env={_WORKER_ENV: "1"},
            warm_engine=False,  # the engine as `dex-local-engine serve` runs it
        ) as stack:
            worker = await stack.start_worker()
            # AgentTestStack does not expose the engine's process; the benchmark only reads its CPU.
            assert stack._engine is not None
            pids = {"engine": stack._engine.process.pid, "Worker": worker.pid}
            print(f"running {turns} turns of one session", file=sys.stderr, flush=True)
            await _run_turns(stack, flow, turns)
            state = await stack.sessions(flow).get_agent_state(_SESSION)
            after = state.last_message_sequence - _MESSAGES_PER_TURN
            reads = _reads(stack.client, flow, after)
            full, recent = [await read.call() for read in reads]
            if getattr(recent, "page", None) != full:
                raise RuntimeError("the window read did not answer list_agent_messages' page")
            figures: dict[str, list[_Round]] = {read.name: [] for read in reads}
            for number in range(rounds):
                ordered = reads if number % 2 == 0 else reads[::-1]
                for read in ordered:
                    figures[read.name].append(await _measure_round(read, calls, pids))
                print(f"  round {number + 1}/{rounds}", file=sys.stderr, flush=True)
    _print(figures, turns, rounds, calls, state.last_message_sequence)


def _print(
    figures: dict[str, list[_Round]], turns: int, rounds: int, calls: int, messages: int
) -> None:
    print(f"turn_end_read: the last turn's page at turn {turns} ({messages} stored messages)")
    print(f"{'read':<46} {'round trip':>11} " + " ".join(f"{name:>9}" for name in _PROCESSES))
    for name, measured in figures.items():
        trip = statistics.median(r.round_trip_ms for r in measured)
        cpu = [statistics.median(r.cpu_ms[p] for r in measured) for p in _PROCESSES]
        print(f"{name:<46} {trip:>8.2f} ms " + " ".join(f"{c:>6.2f} ms" for c in cpu))
    print("(CPU per read, medians of the rounds; CPU is read in clock ticks over a round)")
    print(
        f"command: python benchmarks/turn_end_read.py --turns {turns} --rounds {rounds} "
        f"--calls {calls} | load average {os.getloadavg()[0]:.2f} | cores: {os.cpu_count()}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=190, help="turns before the reads (190)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each read (5)")
    parser.add_argument("--calls", type=int, default=40, help="reads per round (40)")
    arguments = parser.parse_args(argv)
    asyncio.run(_measure(arguments.turns, arguments.rounds, arguments.calls))


if __name__ == "__main__":
    if os.environ.get(SERVER_ADDRESS_ENV) and _WORKER_ENV in os.environ:
        run_agent_worker([build_flow(_MODEL_LATENCY_MS)])
    else:
        main(sys.argv[1:])
