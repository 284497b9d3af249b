"""Benchmark: the floor under ``session_turns.py``, a session turn's Step shape with empty Steps.

A plain Dex Flow moves exactly as one ``session_turns.py`` turn does, with no dex-agents code:

* an RPC publishes the user message, then ``Await`` (wait_for a Channel, 1 Stream write) starts
  the turn;
* ``Model`` sleeps the model latency, writes 2 Stream messages and moves to ``Tool`` plus
  ``Resume`` (``go_to_many``);
* ``Tool`` writes a Stream message, a heartbeat and another Stream message and publishes its
  result; ``Resume`` waits for it (wait_for a Channel) and moves to ``Model`` again;
* the second ``Model`` sleeps, writes 3 Stream messages (the last one ends the turn) and moves
  back to ``Await``;
* the client reads the Stream one message per ``ReadStream`` until the turn's end, then makes
  one query RPC, as ``session_turns.py`` reads ``AgentEvents`` and then a snapshot.

So it has the same 7 Step methods, 2 RPCs, 8 Stream writes and one heartbeat per turn, with
Attributes of a few bytes. What it takes beyond its model sleeps (timed as they really ran, since
``asyncio.sleep`` wakes late) is what the engine, the SDK and gRPC cost for that shape on this
machine: the part of ``session_turns.py``'s overhead that dex-agents code cannot remove.

Usage (from the repository root)::

    uv run python benchmarks/turn_shape_floor.py [--turns 20] [--warmup 3]
        [--model-latency-ms 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Final

import dex
from dex import (
    AsyncContext,
    Attribute,
    Channel,
    Context,
    Flow,
    LongPollTimeoutError,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    Stream,
    Wait,
    rpc,
)
from dex_agents.testing import SERVER_ADDRESS_ENV, AgentTestStack, run_agent_worker

FLOW_TYPE: Final = "TurnShapeFloor"
MODEL_LATENCY_ENV: Final = "DEX_AGENTS_BENCHMARK_MODEL_LATENCY_MS"
WORKER_MODULE: Final = "turn_shape_floor"
_BENCHMARK_DIR: Final = Path(__file__).resolve().parent
_TURN_END: Final = "turn-end"
EVENTS_PER_TURN: Final = 8
_READ_WAIT: Final = timedelta(seconds=5)
_QUERY_DEADLINE_SECONDS: Final = 10.0
_SEQUENTIAL_FLOW: Final = "floor-session"


class TurnShapeFlow(Flow[str]):
    """A session turn's Step shape with empty Steps; its Steps and RPCs share these definitions."""

    def __init__(self, model_latency_seconds: float) -> None:
        self.model_latency_seconds = model_latency_seconds
        self.messages = Channel("messages", str)
        self.results = Channel("results", str)
        self.events = Stream("events", str, 1 << 20)
        self.state = Attribute("state", str)
        self.slept = Attribute("slept", float)
        """The seconds the turn's model sleeps really took (``asyncio.sleep`` wakes late)."""

    def get_flow_type(self) -> str:
        return FLOW_TYPE

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Await(self)).other_steps(Model(self), Tool(self), Resume(self))

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(
            self.messages, self.results, self.events, self.state, self.slept
        )

    @rpc
    def send(self, context: Context, text: str) -> RPCResult[bool]:
        """Queue a user message (``send_user_message``)."""
        self.messages.publish(context, text)
        return RPCResult(True)

    @rpc
    def peek(self, context: Context) -> RPCResult[str]:
        """Read the state and the model sleeps' seconds (``get_agent_snapshot``), as JSON."""
        state = {"state": self.state.get(context) or "", "slept": self.slept.get(context) or 0.0}
        return RPCResult(json.dumps(state))


class Await(Step[str]):
    def __init__(self, flow: TurnShapeFlow) -> None:
        self.flow = flow

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        return Wait.any_of(self.flow.messages.for_one())

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        self.flow.state.set(context, "running")
        self.flow.slept.set(context, 0.0)
        self.flow.events.write(context, "turn_started")
        return dex.go_to(Model, 1)


class Model(Step[int]):
    def __init__(self, flow: TurnShapeFlow) -> None:
        self.flow = flow

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        started = time.perf_counter()
        await asyncio.sleep(self.flow.model_latency_seconds)
        slept = (self.flow.slept.get(context) or 0.0) + time.perf_counter() - started
        self.flow.slept.set(context, slept)
        if input == 1:
            self.flow.events.write(context, "usage_recorded")
            self.flow.events.write(context, "tool_call_deferred")
            return dex.go_to_many(StepMovement.of(Tool, "call-1"), StepMovement.of(Resume, 1))
        for event in ("text_delta", "usage_recorded", _TURN_END):
            self.flow.events.write(context, event)
        self.flow.state.set(context, "done")
        return dex.go_to(Await, "")


class Tool(Step[str]):
    def __init__(self, flow: TurnShapeFlow) -> None:
        self.flow = flow

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        self.flow.events.write(context, "tool_call_started")
        await context.heartbeat()
        self.flow.events.write(context, "tool_call_finished")
        self.flow.results.publish(context, input)
        return dex.dead_end()


class Resume(Step[int]):
    def __init__(self, flow: TurnShapeFlow) -> None:
        self.flow = flow

    async def wait_for(self, context: AsyncContext, input: int) -> Wait:  # type: ignore[override]
        return Wait.any_of(self.flow.results.for_n(input))

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        return dex.go_to(Model, 2)


def build_flow(model_latency_ms: float) -> TurnShapeFlow:
    """The Flow, the same in the client and the Worker child."""
    return TurnShapeFlow(model_latency_ms / 1000)


@dataclass(frozen=True)
class FloorTimings:
    """Seconds per measured turn: until the turn's last event is read, until the query RPC after
    it returned, and what the turn's two model sleeps really took."""

    until_last_event: list[float]
    until_query: list[float]
    model_sleeps: list[float]

    def overhead(self) -> tuple[float, float]:
        """Median seconds above the model sleeps: until the last event, until the query."""
        return (
            statistics.median(
                t - s for t, s in zip(self.until_last_event, self.model_sleeps, strict=True)
            ),
            statistics.median(
                t - s for t, s in zip(self.until_query, self.model_sleeps, strict=True)
            ),
        )


async def measure_floor_turns(
    client: dex.AsyncClient, flow: TurnShapeFlow, turns: int, warmup: int
) -> FloorTimings:
    """Start one Flow and time ``warmup`` + ``turns`` turns of it back to back.

    Raises:
        RuntimeError: A turn ended in the wrong state or with another number of events.
    """
    await client.start_flow(flow, _SEQUENTIAL_FLOW, "")
    token = ""
    timings = FloorTimings([], [], [])
    for number in range(warmup + turns):
        started = time.perf_counter()
        if not await client.invoke_rpc(flow.send, _SEQUENTIAL_FLOW, "Where is order 7?"):
            raise RuntimeError(f"turn {number + 1}: the send RPC refused the message")
        token, reads = await _read_until_turn_end(client, flow, token)
        ended = time.perf_counter()
        state = await _query_until_done(client, flow)
        queried = time.perf_counter()
        if state["state"] != "done" or reads != EVENTS_PER_TURN:
            raise RuntimeError(f"turn {number + 1}: state {state!r}, {reads} events read")
        if number >= warmup:
            timings.until_last_event.append(ended - started)
            timings.until_query.append(queried - started)
            timings.model_sleeps.append(float(str(state["slept"])))
    return timings


async def _query_until_done(client: dex.AsyncClient, flow: TurnShapeFlow) -> dict[str, object]:
    """Query until the state shows the turn done: a Step writes its events while it runs, so the
    turn's last event can be read just before that Step's commit (as a session's snapshot can
    still show its turn running right after ``turn_completed``)."""
    deadline = time.monotonic() + _QUERY_DEADLINE_SECONDS
    while True:
        reply: str = await client.invoke_rpc(flow.peek, _SEQUENTIAL_FLOW)
        state: dict[str, object] = json.loads(reply)
        if state["state"] == "done" or time.monotonic() >= deadline:
            return state
        await asyncio.sleep(0.001)


async def _read_until_turn_end(
    client: dex.AsyncClient, flow: TurnShapeFlow, token: str
) -> tuple[str, int]:
    read = 0
    while True:
        try:
            message = await client.read_stream(_SEQUENTIAL_FLOW, flow.events, token, _READ_WAIT)
        except LongPollTimeoutError:
            continue
        token = message.resume_token
        read += 1
        if message.value == _TURN_END:
            return token, read


async def _measure(turns: int, warmup: int, model_latency_ms: float) -> None:
    flow = build_flow(model_latency_ms)
    with tempfile.TemporaryDirectory(prefix="dex-turn-shape-") as scratch:
        async with AgentTestStack(
            Path(scratch),
            [flow],
            WORKER_MODULE,
            worker_cwd=_BENCHMARK_DIR,
            worker_env={MODEL_LATENCY_ENV: repr(model_latency_ms)},
            warm_engine=False,  # the engine as `dex-local-engine serve` runs it
        ) as stack:
            await stack.start_worker()
            timings = await measure_floor_turns(stack.client, flow, turns, warmup)
    end_ms = 1000 * statistics.median(timings.until_last_event)
    query_ms = 1000 * statistics.median(timings.until_query)
    slept_ms = 1000 * statistics.median(timings.model_sleeps)
    end_overhead, query_overhead = timings.overhead()
    print(
        f"turn_shape_floor: {turns} turns after {warmup} warm-up, {model_latency_ms:g} ms per model call"
    )
    print(f"  the 2 model sleeps of a turn really took, median  {slept_ms:.1f} ms")
    print(f"  until the turn's last event is read, median       {end_ms:.1f} ms")
    print(f"  until the query RPC after it, median              {query_ms:.1f} ms")
    print(
        f"  overhead above the sleeps (last event / query)    {1000 * end_overhead:.1f} ms / {1000 * query_overhead:.1f} ms"
    )
    print(
        f"command: python benchmarks/turn_shape_floor.py --turns {turns} | cores: {os.cpu_count()}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="measured turns (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up turns (default 3)")
    parser.add_argument(
        "--model-latency-ms", type=float, default=100.0, help="per model call (default 100)"
    )
    arguments = parser.parse_args(argv)
    asyncio.run(_measure(arguments.turns, arguments.warmup, arguments.model_latency_ms))


if __name__ == "__main__":
    if os.environ.get(SERVER_ADDRESS_ENV) and MODEL_LATENCY_ENV in os.environ:
        run_agent_worker([build_flow(float(os.environ[MODEL_LATENCY_ENV]))])
    else:
        main(sys.argv[1:])
