"""Benchmark: the engine's memory while 10,000 sessions each start, run one turn and stop.

Every session is a real ``AgentSessionFlow``: a Stepwise agent whose ``ScriptedModelClient``
answers ``Echo: <text>`` (no tools, no latency). ``start_session`` runs its first turn
(``StartAgentSession``, ``RunModel``, ``AwaitUserMessage``); the benchmark waits until the
snapshot shows the turn done, then stops the session (``StopFlow``, cancel), so each session
writes its state, its messages and its history, closes, and is never touched again except by
the samples below. ``--concurrency`` sessions run at a time; the Worker and the Client run in this
process, the engine (``dex-local-engine serve``) in its own, whose resident set size (RSS,
``/proc/<pid>/status``) is printed every ``--sample`` sessions with the throughput. Each sample
also reads the snapshot of the very first session (closed long before, so read from SQLite).

At the end it prints the RSS after the first sample (warm-up) and at the end, and the growth per
1,000 sessions between them, over the whole run and over its later half.

Each session also writes its AgentEvents to the Stream ``AgentEvents``, which the engine keeps in
memory (as Dex's memory Stream Store does) within one byte budget per Flow type and Stream, the
session's ``event_stream_capacity_bytes`` (10 MiB by default): the oldest messages across all
sessions are trimmed once it is full. So RSS climbs until that budget is full (about 8,000 of these
sessions at 10 MiB) and is flat from then on. ``--event-stream-mib 1`` fills it within the first
1,000 sessions, so what remains is the memory of everything else. ``--engine-ref REV`` runs the engine of another git revision
instead (for example ``main``, to see the memory of an engine that keeps closed runs).

Run from the repository root::

    uv run python benchmarks/engine_memory.py
    uv run python benchmarks/engine_memory.py --sessions 2000 --engine-ref main
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from dex import AsyncClient, StepExecutionId, WaitForStepCompletionOptions
from dex_agents import (
    DEFAULT_EVENT_STREAM_CAPACITY_BYTES,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionStepType,
    AgentSnapshot,
    AgentStatus,
)
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    stepwise_agent_session_flow,
)
from dex_agents.testing import in_process_worker, wait_for_agent_snapshot
from engine_checkouts import engine_command, export_engine_source, start_engine

FLOW_TYPE: Final = "EngineMemoryEcho"
_MIB: Final = 1024 * 1024
_TURN_WAIT: Final = WaitForStepCompletionOptions()


def build_echo_flow(
    event_stream_bytes: int = DEFAULT_EVENT_STREAM_CAPACITY_BYTES,
) -> AgentSessionFlow:
    """The session Flow: one Stepwise agent that echoes the user's message."""

    async def respond(request: ModelRequest) -> ScriptedModelReply:
        return ScriptedModelReply(text="Echo: " + ScriptedModelClient.user_texts(request)[-1])

    agent = AgentDefinition(
        name="echo",
        instructions="Echo the user.",
        model=ScriptedModelClient(respond, max_recorded_requests=0),
        event_stream_capacity_bytes=event_stream_bytes,
    )
    return stepwise_agent_session_flow(agent, flow_type=FLOW_TYPE)


def _turn_done(snapshot: AgentSnapshot) -> AgentSnapshot | None:
    state = snapshot.state
    if (
        state is not None
        and state.turn_count == 1
        and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
    ):
        return snapshot
    return None


@dataclass
class _Sample:
    sessions: int
    seconds: float
    rss_bytes: int


async def _one_session(client: AsyncClient, sessions: AgentSessionClient, session_id: str) -> None:
    await sessions.start_session(session_id, f"hello from {session_id}")
    await client.wait_for_step_completion(
        session_id, StepExecutionId(AgentSessionStepType.RUN_MODEL.value, 1), _TURN_WAIT
    )
    await wait_for_agent_snapshot(sessions, session_id, _turn_done, "the first turn to end")
    await client.stop_flow(session_id)


async def _run(arguments: argparse.Namespace) -> None:
    flow = build_echo_flow(int(arguments.event_stream_mib * _MIB))
    with tempfile.TemporaryDirectory(prefix="dex-engine-memory-") as scratch_name:
        scratch = Path(scratch_name)
        source = (
            export_engine_source(arguments.engine_ref, scratch / "ref")
            if arguments.engine_ref
            else None
        )
        command = engine_command(source, f"engine of {arguments.engine_ref}" if source else "")
        engine = await start_engine(command, scratch / "engine.db", scratch / "logs")
        try:
            async with in_process_worker(
                [flow], engine.address, scratch / "cache", max_concurrent_tasks=16
            ) as dex:
                samples = await _drive(arguments, dex.client, dex.sessions(flow), engine.rss_bytes)
        finally:
            await engine.stop()
    _report(arguments, command.label, samples)


async def _drive(
    arguments: argparse.Namespace,
    client: AsyncClient,
    sessions: AgentSessionClient,
    rss: Callable[[], int],
) -> list[_Sample]:
    ids = (f"memory-{number:06d}" for number in range(arguments.sessions))
    done = 0
    samples: list[_Sample] = []
    started = time.perf_counter()
    print(
        f"{'sessions':>9} {'wall s':>8} {'sess/s':>7} {'engine RSS MiB':>15} {'first session':>14}",
        flush=True,
    )

    async def worker() -> None:
        nonlocal done
        for session_id in ids:
            await _one_session(client, sessions, session_id)
            done += 1
            if done % arguments.sample == 0:
                await _sample(sessions, done, started, rss(), samples)

    await asyncio.gather(*(worker() for _ in range(arguments.concurrency)))
    return samples


async def _sample(
    sessions: AgentSessionClient, done: int, started: float, rss_now: int, samples: list[_Sample]
) -> None:
    first = await sessions.get_agent_snapshot("memory-000000")
    texts = [message.text for message in first.messages]
    check = "ok" if texts[-1:] == ["Echo: hello from memory-000000"] else f"WRONG {texts!r}"
    seconds = time.perf_counter() - started
    samples.append(_Sample(done, seconds, rss_now))
    print(
        f"{done:>9} {seconds:>8.1f} {done / seconds:>7.1f} {rss_now / _MIB:>15.1f} {check:>14}",
        flush=True,
    )


def _report(arguments: argparse.Namespace, label: str, samples: list[_Sample]) -> None:
    if len(samples) < 2:
        print("too few samples to compare; raise --sessions or lower --sample")
        return
    first, last = samples[0], samples[-1]
    per_thousand = (last.rss_bytes - first.rss_bytes) / (last.sessions - first.sessions) * 1000
    middle = samples[len(samples) // 2]
    later_per_thousand = (
        (last.rss_bytes - middle.rss_bytes) / (last.sessions - middle.sessions) * 1000
        if last.sessions > middle.sessions
        else 0.0
    )
    later = [sample.rss_bytes for sample in samples[len(samples) // 2 :]]
    print(
        f"engine: {label}; {arguments.sessions} sessions, {arguments.concurrency} at a time; "
        f"AgentEvents Stream budget {arguments.event_stream_mib:g} MiB"
    )
    print(f"  RSS after {first.sessions:>6} sessions      {first.rss_bytes / _MIB:.1f} MiB")
    print(f"  RSS after {middle.sessions:>6} sessions      {middle.rss_bytes / _MIB:.1f} MiB")
    print(f"  RSS after {last.sessions:>6} sessions      {last.rss_bytes / _MIB:.1f} MiB")
    print(f"  growth per 1,000 sessions, whole run  {per_thousand / _MIB:+.2f} MiB")
    print(f"  growth per 1,000 sessions, later half {later_per_thousand / _MIB:+.2f} MiB")
    print(f"  median RSS of the later half          {statistics.median(later) / _MIB:.1f} MiB")
    print(f"cores: {os.cpu_count()}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--sample", type=int, default=500, help="sessions between samples")
    parser.add_argument("--engine-ref", default="", help="run the engine of this git revision")
    parser.add_argument(
        "--event-stream-mib",
        type=float,
        default=DEFAULT_EVENT_STREAM_CAPACITY_BYTES / _MIB,
        help="the sessions' AgentEvents Stream budget in MiB (default: the session default, 10)",
    )
    asyncio.run(_run(parser.parse_args(argv)))


if __name__ == "__main__":
    main(sys.argv[1:])
