"""Benchmark: a durable Stepwise turn against the same runner calls made in process.

One turn of a Stepwise agent with one READ tool (``lookup_order``) and a ``ScriptedModelClient``
whose script sleeps ``--model-latency-ms`` (asyncio) before answering: the first model call asks
for the tool, the second gives the final answer. So a turn is two model calls and one tool call.

It measures, and prints as a table:

1. the durable turn: a real ``dex-local-engine serve`` process (process-crash-safe, its default)
   and a Worker child process (``python -m session_turns``, as in production), timed from
   the user message until the turn is known completed. The client calls
   ``AgentSessionClient.run_turn`` as a user of the public API does (``--completion run-turn``,
   the default: it follows the AgentEvents Stream and reads the turn's own messages at the end),
   or long-polls the session's AgentEvents Stream for ``turn_completed`` and then reads the turn
   state once with ``get_agent_state`` to confirm it (``--completion state``; the answer is
   checked from the turn's ``text_delta`` events), or reads the whole snapshot instead
   (``--completion events``, what the client did before ``get_agent_state``), or polls the
   snapshot every ``--poll-interval-ms`` (``--completion poll``). Median over ``--turns`` turns
   after ``--warmup`` turns;
2. the same runner's calls made in process, no engine: ``run_model_step``,
   ``execute_deferred_tool_call``, ``run_model_step`` with the same script and tool; median;
3. their ratio (goal: at most 1.10);
3a. the floor: ``turn_shape_floor.py``'s Flow, the same Step shape with empty Steps, on the same
   engine and Worker right after the session's turns, and dex-agents' share of the overhead
   above it;
4. turns per second of ``--sessions`` concurrent sessions, each running turns back to back for
   ``--duration`` seconds, and how busy the engine, Worker and client processes were meanwhile.

The sequential turns all run in one session (its first turn starts it with ``start_session``), so
later turns carry a longer history; the table shows the first and last five measured turns.

Finding out where the overhead goes:

- ``--profile`` puts every mark of a turn on one wall clock timeline: the client's, the engine's
  history (when it started each Step attempt and recorded each result) and the Worker child's
  (task received and result sent in the SDK's pull Worker, the runner's calls, the model's and the
  tool's start and end), and prints the median gap between consecutive marks and their sum by kind;
- ``--cprofile-worker`` prints the Worker child's cProfile over the sequential turns;
- ``--memoize-sdk`` is an experiment: it memoizes two SDK functions that recompute constant results,
  to show what they cost;
- ``benchmarks/turn_shape_floor.py`` runs a plain Dex Flow with this turn's Step shape (the same
  Step methods, RPCs, Stream writes and reads) and empty Steps: the part of the overhead that the
  engine, the SDK and gRPC take before any dex-agents code runs.

Run from the repository root::

    uv run python benchmarks/session_turns.py
    uv run python benchmarks/session_turns.py --turns 50 --sessions 10 --model-latency-ms 100
    uv run python benchmarks/session_turns.py --profile
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import itertools
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Final, TypeVar

import grpc
from dex import AsyncClient, LongPollTimeoutError
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from dex_agents import (
    AgentEventType,
    AgentEventWriter,
    AgentMessage,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSnapshot,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentToolCallStatus,
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionResult,
    TurnCompleted,
)
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    StepwiseAgentRunner,
    function_tool,
    stepwise_agent_session_flow,
    stepwise_agent_session_options,
)
from dex_agents.testing import (
    DEXCLI_ENV,
    SERVER_ADDRESS_ENV,
    AgentTestStack,
    run_agent_worker,
)
from engine_message_counts import (
    COUNTS_FILE_ENV,
    engine_hook_environment,
    install_hook,
    read_counts,
)
from turn_shape_floor import FloorTimings, measure_floor_turns
from turn_shape_floor import build_flow as build_floor_flow
from worker_cprofile import collect_cprofile, start_cprofile

FLOW_TYPE: Final = "SessionTurnsBenchmarkAgent"
GOAL_RATIO: Final = 1.10

# The Worker child learns the model latency from its environment, so both processes build the
# same Flow from the same command line.
_MODEL_LATENCY_ENV: Final = "DEX_AGENTS_BENCHMARK_MODEL_LATENCY_MS"
# With --profile the Worker child appends "<label> <wall ns>" lines here around each model and
# tool call, so the client can place them on one timeline with the engine's history.
_MARKS_FILE_ENV: Final = "DEX_AGENTS_BENCHMARK_MARKS_FILE"
# With --cprofile-worker the Worker child runs under cProfile and writes its statistics here
# when it gets SIGUSR1 (after the sequential turns).
_CPROFILE_FILE_ENV: Final = "DEX_AGENTS_BENCHMARK_CPROFILE_FILE"
# With --memoize-sdk both processes memoize two SDK functions that recompute constant results
# (an experiment: how much of the overhead they are).
_MEMOIZE_SDK_ENV: Final = "DEX_AGENTS_BENCHMARK_MEMOIZE_SDK"
# With --cprofile-engine the engine process runs under cProfile: a sitecustomize module on its
# PYTHONPATH starts the profiler in a process whose arguments start with "serve" and writes the
# statistics to this file on SIGUSR1. The engine's own code is unchanged.
_ENGINE_CPROFILE_FILE_ENV: Final = "DEX_AGENTS_BENCHMARK_ENGINE_CPROFILE_FILE"
_ENGINE_PROFILE_HOOK: Final = f"""
import os, sys
_path = os.environ.get({_ENGINE_CPROFILE_FILE_ENV!r})
if _path and sys.argv[1:2] == ["serve"]:
    import cProfile, signal
    _profiler = cProfile.Profile()

    def _dump(signal_number, frame):
        _profiler.disable()
        _profiler.dump_stats(_path + ".partial")
        os.replace(_path + ".partial", _path)

    signal.signal(signal.SIGUSR1, _dump)
    _profiler.enable()
"""
_WORKER_MODULE: Final = "session_turns"
_ReadT = TypeVar("_ReadT")
_BENCHMARK_DIR: Final = Path(__file__).resolve().parent

_USER_TEXT: Final = "Where is order 7?"
_ORDER: Final = {"order_id": "7", "item": "teapot", "status": "shipped"}
_FINAL_PREFIX: Final = "Order 7: "
_READ_WAIT: Final = timedelta(seconds=5)
_TURN_TIMEOUT_SECONDS: Final = 60.0
_SEQUENTIAL_SESSION: Final = "sequential-session"
_ROUND_TRIPS: Final = 30
_HISTORY_PAGE_SIZE: Final = 50
_HISTORY_MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024


class CompletionMode(StrEnum):
    """How the client learns that a durable turn completed."""

    RUN_TURN = "run-turn"
    STATE = "state"
    EVENTS = "events"
    POLL = "poll"


def _mark(label: str) -> None:
    """Record ``label`` at the current wall time when the profile asked for marks."""
    path = os.environ.get(_MARKS_FILE_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as marks:
            marks.write(f"{label} {time.time_ns()}\n")


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    _mark("tool_start")
    if order_id != _ORDER["order_id"]:
        raise KeyError(order_id)
    _mark("tool_end")
    return dict(_ORDER)


def _script(latency_seconds: float) -> Callable[[ModelRequest], Awaitable[ScriptedModelReply]]:
    """The model: after ``latency_seconds``, ask for the lookup, then answer from its result."""

    async def respond(request: ModelRequest) -> ScriptedModelReply:
        _mark("model_start")
        await asyncio.sleep(latency_seconds)
        results = ScriptedModelClient.tool_results(request)
        _mark("model_end")
        if not results:
            return ScriptedModelReply(
                tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"})]
            )
        return ScriptedModelReply(text=_FINAL_PREFIX + results[-1].output)

    return respond


def build_definition(latency_ms: float) -> AgentDefinition:
    """The benchmark agent: one READ tool, a scripted model answering after ``latency_ms``."""
    return AgentDefinition(
        name="benchmark-support",
        instructions="You answer questions about orders.",
        model=ScriptedModelClient(_script(latency_ms / 1000.0), max_recorded_requests=0),
        tools=[lookup_order],
    )


def build_flow(latency_ms: float) -> AgentSessionFlow:
    """The session Flow of the benchmark agent, the same in the client and the Worker child."""
    return stepwise_agent_session_flow(build_definition(latency_ms), flow_type=FLOW_TYPE)


# --- in process: the runner's calls without an engine ----------------------------------------


@dataclass
class InProcessSession:
    """The session's bookkeeping in memory: stored messages and the turn's final tool records."""

    runner: StepwiseAgentRunner
    flow_id: str = "in-process-session"
    turn_number: int = 0
    messages: list[AgentMessage] = dataclasses.field(default_factory=list)

    def _store(self, messages: Sequence[FrameworkMessage], turn_id: str) -> None:
        for message in messages:
            self.messages.append(
                AgentMessage.from_framework_message(
                    message, sequence=len(self.messages) + 1, turn_id=turn_id, created_at=None
                )
            )

    def _context(
        self, turn_id: str, run_state: str | None, records: dict[str, AgentToolCall]
    ) -> AgentTurnContext:
        options = stepwise_agent_session_options(self.runner.definition)
        return AgentTurnContext(
            flow_id=self.flow_id,
            turn_id=turn_id,
            attempt=1,
            messages=tuple(self.messages),
            framework_run_state=run_state,
            tool_calls=dict(records),
            events=AgentEventWriter.discarding(turn_id=turn_id),
            tool_policies=options.tool_policies,
            default_tool_effect=options.default_tool_effect,
        )

    async def run_turn(self, text: str) -> str:
        """Run one turn: model call, each tool call, model call... until the turn completes.

        Returns:
            The final answer's text.
        """
        self.turn_number += 1
        turn_id = f"turn-{self.turn_number}"
        self._store([self.runner.build_user_message(text)], turn_id)
        records: dict[str, AgentToolCall] = {}
        run_state: str | None = None
        while True:
            outcome = await self.runner.run_model_step(self._context(turn_id, run_state, records))
            self._store(outcome.new_messages, turn_id)
            if isinstance(outcome, TurnCompleted):
                return self.messages[-1].text or ""
            assert isinstance(outcome, ToolCallsRequested)
            run_state = outcome.framework_run_state
            for order, call in enumerate(outcome.tool_calls, start=len(records)):
                records[call.tool_call_id] = await self._run_tool(call, turn_id, order)

    async def _run_tool(self, call: DeferredToolCall, turn_id: str, order: int) -> AgentToolCall:
        record = AgentToolCall(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            arguments=call.arguments,
            effect=call.policy.effect,
            requires_approval=call.policy.requires_approval,
            status=AgentToolCallStatus.APPROVED,
            turn_id=turn_id,
            deferral_order=order,
        )
        result = await self.runner.execute_deferred_tool_call(
            DeferredToolExecution(
                flow_id=self.flow_id,
                tool_call=record,
                attempt=1,
                events=AgentEventWriter.discarding(turn_id=turn_id),
            )
        )
        assert isinstance(result, ToolExecutionResult)
        return dataclasses.replace(
            record, status=AgentToolCallStatus.SUCCEEDED, output=result.output
        )


@dataclass(frozen=True)
class InProcessFigures:
    """Wall seconds of each measured in-process turn, and the CPU seconds of all of them."""

    durations: list[float]
    cpu_seconds: float


async def measure_in_process(latency_ms: float, turns: int, warmup: int) -> InProcessFigures:
    """Time ``turns`` in-process turns of one session, after ``warmup`` turns."""
    session = InProcessSession(StepwiseAgentRunner(build_definition(latency_ms)))
    durations: list[float] = []
    cpu_started = 0.0
    for index in range(warmup + turns):
        if index == warmup:
            cpu_started = time.process_time()
        started = time.perf_counter()
        answer = await session.run_turn(_USER_TEXT)
        elapsed = time.perf_counter() - started
        if not answer.startswith(_FINAL_PREFIX):
            raise RuntimeError(f"the in-process turn answered {answer!r}")
        if index >= warmup:
            durations.append(elapsed)
    return InProcessFigures(durations, time.process_time() - cpu_started)


# --- durable: engine process, Worker child, client --------------------------------------------


@dataclass(frozen=True)
class TurnTiming:
    """One durable turn: seconds until ``turn_completed`` was read, and until the snapshot showed it.

    The ``*_ns`` fields are wall clock times (``time.time_ns``), comparable with the Worker's
    marks and the engine's history event times for the profile.
    """

    event_seconds: float | None
    snapshot_seconds: float
    snapshot_reads: int
    events_read: int
    sent_ns: int
    accepted_ns: int
    event_ns: int | None
    snapshot_ns: int


def _turn_done(snapshot: AgentSnapshot, turn_count: int) -> bool:
    state = snapshot.state
    return (
        state is not None
        and state.turn_count >= turn_count
        and state.active_turn_id is None
        and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
    )


def _state_done(state: AgentState, turn_count: int) -> bool:
    return (
        state.turn_count >= turn_count
        and state.active_turn_id is None
        and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
    )


def _check_answer(session_id: str, snapshot: AgentSnapshot, turn_count: int) -> None:
    answer = snapshot.messages[-1].text if snapshot.messages else None
    _check_state_and_text(session_id, snapshot.state, answer, turn_count)


def _check_state_and_text(
    session_id: str, state: AgentState | None, answer: str | None, turn_count: int
) -> None:
    if state is None or state.turn_count != turn_count or state.last_turn_error:
        raise RuntimeError(f"session {session_id} did not complete turn {turn_count}: {state}")
    if not answer or not answer.startswith(_FINAL_PREFIX):
        raise RuntimeError(f"turn {turn_count} of session {session_id} answered {answer!r}")


class _DurableSession:
    """One session on the engine, driven turn by turn, following its AgentEvents Stream."""

    def __init__(
        self,
        client: AsyncClient,
        sessions: AgentSessionClient,
        session_id: str,
        completion: CompletionMode,
        poll_interval: float,
    ) -> None:
        self._client = client
        self._sessions = sessions
        self._session_id = session_id
        self._completion = completion
        self._poll_interval = poll_interval
        self._resume_token = ""
        self._turn_text: str | None = None
        self.turn_count = 0

    async def run_turn(self) -> TurnTiming:
        """Start the next turn (the first one starts the session) and wait until it completed.

        Raises:
            RuntimeError: The turn failed or answered something unexpected.
            TimeoutError: The turn did not complete in time.
        """
        self.turn_count += 1
        sent_ns = time.time_ns()
        started = time.perf_counter()
        if self._completion is CompletionMode.RUN_TURN:
            return await self._public_run_turn(sent_ns, started)
        if self.turn_count == 1:
            await self._sessions.start_session(self._session_id, _USER_TEXT)
        elif not await self._sessions.send_user_message(self._session_id, _USER_TEXT):
            raise RuntimeError(f"session {self._session_id} refused the user message")
        accepted_ns = time.time_ns()
        async with asyncio.timeout(_TURN_TIMEOUT_SECONDS):
            event_seconds: float | None = None
            event_ns: int | None = None
            events_read = 0
            if self._completion is not CompletionMode.POLL:
                events_read = await self._read_until_turn_completed()
                event_seconds = time.perf_counter() - started
                event_ns = time.time_ns()
            if self._completion is CompletionMode.STATE:
                state, snapshot_reads = await self._poll_state()
            else:
                snapshot, snapshot_reads = await self._poll_snapshot()
        snapshot_seconds = time.perf_counter() - started
        snapshot_ns = time.time_ns()
        if self._completion is CompletionMode.STATE:
            # The answer as the turn's text_delta events carried it: no transcript is read.
            _check_state_and_text(self._session_id, state, self._turn_text, self.turn_count)
        else:
            _check_answer(self._session_id, snapshot, self.turn_count)
        return TurnTiming(
            event_seconds,
            snapshot_seconds,
            snapshot_reads,
            events_read,
            sent_ns,
            accepted_ns,
            event_ns,
            snapshot_ns,
        )

    async def _public_run_turn(self, sent_ns: int, started: float) -> TurnTiming:
        """The turn as a user of the public API runs it: one ``run_turn``."""
        result = await self._sessions.run_turn(
            self._session_id, _USER_TEXT, timeout=_TURN_TIMEOUT_SECONDS
        )
        done_ns = time.time_ns()
        elapsed = time.perf_counter() - started
        expected = f"turn-{self.turn_count}"
        text = result.text or ""
        if not result.completed or result.turn_id != expected or not text.startswith(_FINAL_PREFIX):
            raise RuntimeError(f"session {self._session_id} did not complete {expected}: {result}")
        return TurnTiming(None, elapsed, 0, 0, sent_ns, sent_ns, None, done_ns)

    async def _read_until_turn_completed(self) -> int:
        """Read AgentEvents until this turn's ``turn_completed``; how many events were read."""
        turn_id = f"turn-{self.turn_count}"
        flow = self._sessions.flow
        read = 0
        texts: list[str] = []
        while True:
            try:
                message = await self._client.read_stream(
                    self._session_id, flow.agent_events, self._resume_token, _READ_WAIT
                )
            except LongPollTimeoutError:
                continue
            self._resume_token = message.resume_token
            read += 1
            event = message.value
            if event.turn_id == turn_id and event.type == AgentEventType.TEXT_DELTA:
                texts.append(str(json.loads(event.payload)["text"]))
            if event.turn_id == turn_id and event.type in (
                AgentEventType.TURN_COMPLETED,
                AgentEventType.TURN_FAILED,
            ):
                # The final answer is the last model call's text (earlier calls may say more).
                self._turn_text = texts[-1] if texts else None
                return read

    async def _poll_state(self) -> tuple[AgentState, int]:
        """The first ``get_agent_state`` that shows the turn completed, and how many reads."""
        return await self._poll(
            self._sessions.get_agent_state, lambda state: _state_done(state, self.turn_count)
        )

    async def _poll_snapshot(self) -> tuple[AgentSnapshot, int]:
        """The first snapshot that shows the turn completed, and how many reads it took."""
        return await self._poll(
            self._sessions.get_agent_snapshot,
            lambda snapshot: _turn_done(snapshot, self.turn_count),
        )

    async def _poll(
        self, read: Callable[[str], Awaitable[_ReadT]], is_done: Callable[[_ReadT], bool]
    ) -> tuple[_ReadT, int]:
        reads = 0
        while True:
            value = await read(self._session_id)
            reads += 1
            if is_done(value):
                return value, reads
            await asyncio.sleep(self._poll_interval)


@dataclass(frozen=True)
class DurableFigures:
    """Timings of the sequential durable turns, the bare RPC round trips and the concurrent run."""

    turns: list[TurnTiming]
    turns_cpu_seconds: dict[str, float]
    steps_per_turn: list[str]
    health_check_seconds: list[float]
    snapshot_rpc_seconds: list[float]
    concurrent_turns: int
    concurrent_seconds: float
    concurrent_latencies: list[float]
    concurrent_cpu_seconds: dict[str, float]
    profile: list[list[_Mark]]
    message_sizes: list[_Mark]
    worker_cprofile: str
    engine_cprofile: str
    floor: FloorTimings
    message_counts: dict[str, int] = dataclasses.field(default_factory=dict)
    message_bytes: dict[str, int] = dataclasses.field(default_factory=dict)


async def _sequential_turns(
    client: AsyncClient, sessions: AgentSessionClient, options: BenchmarkOptions, cpu: _CpuMeter
) -> list[TurnTiming]:
    """Run the warm-up and the measured turns of one session; ``cpu`` covers the measured ones."""
    session = _DurableSession(
        client, sessions, _SEQUENTIAL_SESSION, options.completion, options.poll_interval
    )
    timings: list[TurnTiming] = []
    total = options.warmup + options.turns
    for index in range(total):
        if index == options.warmup:
            cpu.start()
        timing = await session.run_turn()
        if index >= options.warmup:
            timings.append(timing)
        if (index + 1) % 5 == 0 or index + 1 == total:
            _progress(
                f"  durable turn {index + 1}/{total}: {timing.snapshot_seconds * 1000:.1f} ms"
            )
    return timings


async def _concurrent_turns(
    client: AsyncClient, sessions: AgentSessionClient, options: BenchmarkOptions
) -> tuple[int, float, list[float]]:
    """Turns completed by ``options.sessions`` sessions running back to back, and the window."""
    started = time.perf_counter()
    deadline = started + options.duration
    latencies: list[float] = []

    async def drive(number: int) -> None:
        session = _DurableSession(
            client,
            sessions,
            f"concurrent-session-{number}",
            options.completion,
            options.poll_interval,
        )
        while time.perf_counter() < deadline:
            latencies.append((await session.run_turn()).snapshot_seconds)

    async def report_progress() -> None:
        while True:
            await asyncio.sleep(max(options.duration / 4, 1.0))
            _progress(
                f"  concurrent: {len(latencies)} turns after {time.perf_counter() - started:.1f} s"
            )

    reporter = asyncio.create_task(report_progress())
    try:
        await asyncio.gather(*(drive(number) for number in range(1, options.sessions + 1)))
    finally:
        reporter.cancel()
    return len(latencies), time.perf_counter() - started, latencies


async def _round_trips(call: Callable[[], Awaitable[object]], count: int) -> list[float]:
    durations: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        await call()
        durations.append(time.perf_counter() - started)
    return durations


async def measure_durable(options: BenchmarkOptions, state_dir: Path) -> DurableFigures:
    """Run the sequential and the concurrent durable turns against a fresh engine and Worker."""
    flow = build_flow(options.model_latency_ms)
    marks_file = state_dir / "worker-marks.txt"
    worker_env = {_MODEL_LATENCY_ENV: repr(options.model_latency_ms)}
    if options.profile:
        worker_env[_MARKS_FILE_ENV] = str(marks_file)
    cprofile_file = state_dir / "worker.cprofile"
    if options.cprofile_worker:
        worker_env[_CPROFILE_FILE_ENV] = str(cprofile_file)
    if options.memoize_sdk:
        worker_env[_MEMOIZE_SDK_ENV] = "1"
        _memoize_sdk()
    engine_cprofile_file = state_dir / "engine.cprofile"
    floor_flow = build_floor_flow(options.model_latency_ms)
    stack = AgentTestStack(
        state_dir,
        [flow, floor_flow],
        _WORKER_MODULE,
        worker_cwd=_BENCHMARK_DIR,
        worker_env=worker_env,
        warm_engine=False,  # the engine as `dex-local-engine serve` runs it
    )
    counts_file = state_dir / "engine-message-counts.json"
    if options.cprofile_engine:
        await _enter_with_engine_profiler(stack, state_dir, engine_cprofile_file)
    elif options.count_messages:
        hook_dir = install_hook(state_dir / "engine-count-hook")
        await _enter_with_engine_hook(stack, hook_dir, COUNTS_FILE_ENV, counts_file)
    else:
        await stack.__aenter__()
    try:
        _progress(f"engine on {stack.server_address}; starting the Worker child process")
        worker = await stack.start_worker()
        sessions = stack.sessions(flow)
        # AgentTestStack does not expose the engine's process; the benchmark only reads its CPU.
        engine_pid = stack._engine.process.pid if stack._engine is not None else None
        processes = {"engine": engine_pid, "Worker": worker.pid, "client": os.getpid()}
        cpu = (
            _CountingCpuMeter(processes, engine_pid, counts_file)
            if options.count_messages and engine_pid is not None
            else _CpuMeter(processes)
        )
        _progress(f"sequential durable turns ({options.warmup} warm-up + {options.turns})")
        timings = await _sequential_turns(stack.client, sessions, options, cpu)
        sequential_cpu = cpu.used()
        counts, count_bytes = (
            cpu.counted() if isinstance(cpu, _CountingCpuMeter) else (Counter(), Counter())
        )
        _progress(
            "the same Step shape with empty Steps (turn_shape_floor.py), same engine and Worker"
        )
        floor = await measure_floor_turns(stack.client, floor_flow, options.turns, options.warmup)
        cprofile_text = ""
        if options.cprofile_worker:
            cprofile_text = await collect_cprofile(worker.pid, cprofile_file)
        engine_cprofile_text = ""
        if options.cprofile_engine and engine_pid is not None:
            engine_cprofile_text = await collect_cprofile(engine_pid, engine_cprofile_file)
        history = await _read_history(stack.server_address, _SEQUENTIAL_SESSION)
        steps = _steps_of_last_turn(_step_methods(history))
        profile: list[list[_Mark]] = []
        sizes: list[_Mark] = []
        if options.profile:
            worker_marks, all_sizes = _split_sizes(_read_worker_marks(marks_file))
            marks = [
                *worker_marks,
                *(mark for event in history for mark in _engine_event_marks(event)),
            ]
            profile = [_turn_timeline(turn, marks) for turn in timings]
            last = timings[-1]
            sizes = [m for m in all_sizes if last.sent_ns <= m.wall_ns <= last.snapshot_ns]
        _progress("bare round trips: health check, snapshot RPC")
        health = await _round_trips(stack.client.health_check, _ROUND_TRIPS)
        snapshots = await _round_trips(
            lambda: sessions.get_agent_snapshot(_SEQUENTIAL_SESSION), _ROUND_TRIPS
        )
        _progress(f"{options.sessions} concurrent sessions for {options.duration:g} s")
        cpu.start()
        count, seconds, latencies = await _concurrent_turns(stack.client, sessions, options)
        concurrent_cpu = cpu.used()
    finally:
        await stack.close()
    return DurableFigures(
        timings,
        sequential_cpu,
        steps,
        health,
        snapshots,
        count,
        seconds,
        latencies,
        concurrent_cpu,
        profile,
        sizes,
        cprofile_text,
        engine_cprofile_text,
        floor,
        dict(counts),
        dict(count_bytes),
    )


async def _enter_with_engine_profiler(
    stack: AgentTestStack, state_dir: Path, stats_file: Path
) -> None:
    """Enter ``stack`` with its engine process under cProfile (see ``_ENGINE_PROFILE_HOOK``)."""
    hook_dir = state_dir / "engine-profile-hook"
    hook_dir.mkdir(parents=True, exist_ok=True)
    (hook_dir / "sitecustomize.py").write_text(_ENGINE_PROFILE_HOOK)
    await _enter_with_engine_hook(stack, hook_dir, _ENGINE_CPROFILE_FILE_ENV, stats_file)


async def _enter_with_engine_hook(
    stack: AgentTestStack, hook_dir: Path, env_name: str, output_file: Path
) -> None:
    """Enter ``stack`` with ``hook_dir``'s ``sitecustomize`` in its engine, writing to a file."""
    # Only the engine started here gets the hook; the Worker child starts without it.
    with engine_hook_environment(hook_dir, env_name, output_file):
        await stack.__aenter__()


class _CpuMeter:
    """CPU seconds each named process used between ``start()`` and ``used()``.

    CPU time, unlike wall time, hardly changes when other work shares the machine.
    """

    def __init__(self, processes: Mapping[str, int | None]) -> None:
        self._processes = dict(processes)
        self._started: dict[str, float | None] = {}

    def start(self) -> None:
        """Take the starting reading."""
        self._started = {name: _cpu_seconds(pid) for name, pid in self._processes.items()}

    def used(self) -> dict[str, float]:
        """Seconds used since ``start()``, for each process whose CPU time could be read."""
        used: dict[str, float] = {}
        for name, pid in self._processes.items():
            before, after = self._started.get(name), _cpu_seconds(pid)
            if before is not None and after is not None:
                used[name] = after - before
        return used


class _CountingCpuMeter(_CpuMeter):
    """A ``_CpuMeter`` that also reads the engine's message counts at ``start`` and ``used``."""

    def __init__(self, processes: Mapping[str, int | None], engine_pid: int, path: Path) -> None:
        super().__init__(processes)
        self._engine_pid = engine_pid
        self._path = path
        self._at_start: tuple[Counter[str], Counter[str]] = (Counter(), Counter())
        self._counted: tuple[Counter[str], Counter[str]] = (Counter(), Counter())

    def start(self) -> None:
        self._at_start = read_counts(self._engine_pid, self._path)
        super().start()

    def used(self) -> dict[str, float]:
        used = super().used()
        counts, sizes = read_counts(self._engine_pid, self._path)
        self._counted = (counts - self._at_start[0], sizes - self._at_start[1])
        return used

    def counted(self) -> tuple[Counter[str], Counter[str]]:
        """Messages and frame bytes by kind between ``start`` and ``used``."""
        return self._counted


def _cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of a process so far, from /proc; None where unreadable."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    # utime and stime are fields 14 and 15 of stat(5); the split starts at field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _steps_of_last_turn(step_methods: list[str]) -> list[str]:
    """The Step methods of the last turn, in history order: from its ``AwaitUserMessage.execute``.

    ``AwaitUserMessage.wait_for`` completes when it returns its Wait, right after the previous
    turn, so a turn starts with the execute that takes the user message.
    """
    starts = [
        index for index, step in enumerate(step_methods) if step == "AwaitUserMessage.execute"
    ]
    return step_methods[starts[-1] :] if starts else step_methods


# --- profile: where the durable turn's time goes ----------------------------------------------


@dataclass(frozen=True)
class _Mark:
    """One point of a turn's timeline: wall ns, who saw it, and what happened."""

    wall_ns: int
    source: str
    label: str


def _read_worker_marks(path: Path) -> list[_Mark]:
    if not path.exists():
        return []
    marks: list[_Mark] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        label, _, wall_ns = line.rpartition(" ")
        marks.append(_Mark(int(wall_ns), "worker", label))
    return marks


def _split_sizes(marks: Sequence[_Mark]) -> tuple[list[_Mark], list[_Mark]]:
    """Timeline marks, and the ``bytes ...=N`` marks of task and result sizes."""
    sizes = [mark for mark in marks if mark.label.startswith("bytes ")]
    return [mark for mark in marks if not mark.label.startswith("bytes ")], sizes


async def _read_history(server_address: str, flow_id: str) -> list[pb.FlowHistoryEvent]:
    """Every history event of ``flow_id`` through FlowService ``GetHistoryEvents``.

    Small pages and a large receive limit: each recorded ``get_agent_snapshot`` carries the whole
    snapshot, so 500 events (what ``dex-local-engine history`` asks for) can pass gRPC's 4 MiB.
    """
    events: list[pb.FlowHistoryEvent] = []
    options = [("grpc.max_receive_message_length", _HISTORY_MAX_MESSAGE_BYTES)]
    async with grpc.aio.insecure_channel(server_address, options=options) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        token = b""
        while True:
            response = await stub.GetHistoryEvents(
                pb.GetHistoryEventsRequest(
                    flow_id=flow_id, estimate_page_size=_HISTORY_PAGE_SIZE, next_page_token=token
                ),
                timeout=30,
            )
            events.extend(response.events)
            token = response.next_page_token
            if not token:
                return events


def _step_methods(history: Sequence[pb.FlowHistoryEvent]) -> list[str]:
    """``StepType.wait_for`` / ``StepType.execute`` of each completed Step method, in order."""
    methods: list[str] = []
    for event in history:
        kind = event.WhichOneof("payload")
        if kind == "step_wait_for_completed":
            methods.append(f"{event.step_wait_for_completed.context.step_type}.wait_for")
        elif kind == "step_execute_completed":
            methods.append(f"{event.step_execute_completed.context.step_type}.execute")
    return methods


def _engine_event_marks(event: pb.FlowHistoryEvent) -> list[_Mark]:
    kind = event.WhichOneof("payload")
    recorded_ns = event.event_time.ToNanoseconds()
    if kind == "rpc_execution_completed":
        return [_Mark(recorded_ns, "engine", f"RPC {event.rpc_execution_completed.rpc_name} done")]
    if kind not in ("step_wait_for_completed", "step_execute_completed"):
        return []
    context = getattr(event, kind).context
    method = "wait_for" if kind == "step_wait_for_completed" else "execute"
    name = f"{context.step_type}.{method}"
    marks = [_Mark(recorded_ns, "engine", f"{name} result recorded")]
    if context.HasField("started_time"):
        marks.append(
            _Mark(context.started_time.ToNanoseconds(), "engine", f"{name} attempt started")
        )
    return marks


def _turn_timeline(turn: TurnTiming, marks: Sequence[_Mark]) -> list[_Mark]:
    """The marks inside one turn, in time order, with repeated labels numbered."""
    client = [
        _Mark(turn.sent_ns, "client", "send_user_message sent"),
        _Mark(turn.accepted_ns, "client", "send_user_message returned"),
        _Mark(turn.snapshot_ns, "client", "snapshot shows turn completed"),
    ]
    if turn.event_ns is not None:
        client.append(_Mark(turn.event_ns, "client", "turn_completed event read"))
    inside = [mark for mark in marks if turn.sent_ns <= mark.wall_ns <= turn.snapshot_ns]
    ordered = sorted([*client, *inside], key=lambda mark: mark.wall_ns)
    seen: dict[str, int] = {}
    numbered: list[_Mark] = []
    for mark in ordered:
        seen[mark.label] = seen.get(mark.label, 0) + 1
        label = mark.label if seen[mark.label] == 1 else f"{mark.label} #{seen[mark.label]}"
        numbered.append(_Mark(mark.wall_ns, mark.source, label))
    return numbered


def _profile_rows(timelines: Sequence[list[_Mark]]) -> list[tuple[str, str, float]]:
    """Median ms of each gap between consecutive marks, for turns whose marks came in one order."""
    if not timelines:
        return []
    shapes: dict[tuple[str, ...], list[list[_Mark]]] = {}
    for timeline in timelines:
        shapes.setdefault(tuple(mark.label for mark in timeline), []).append(timeline)
    # The most common order of events; a turn that interleaved differently is left out.
    common = max(shapes.values(), key=len)
    rows: list[tuple[str, str, float]] = []
    for index in range(1, len(common[0])):
        previous, current = common[0][index - 1], common[0][index]
        gaps = [(t[index].wall_ns - t[index - 1].wall_ns) / 1e6 for t in common]
        rows.append(
            (
                f"{previous.source}: {previous.label}",
                f"{current.source}: {current.label}",
                _median(gaps),
            )
        )
    return rows


class _GapKind(StrEnum):
    """Where a gap between two consecutive marks of a turn's timeline is spent."""

    RUNNER = "runner: model and tool calls (what the in-process turn also does)"
    WORKER = "Worker: SDK task decode/encode + session Step code around the runner"
    WORKER_RPC = "Worker: serving the client's RPCs (send_user_message, get_agent_snapshot)"
    DISPATCH = "engine -> Worker: Step attempt start to task received (incl. gRPC)"
    DELIVERY = "Worker -> engine: result sent to result recorded (incl. gRPC)"
    ENGINE = "engine: result recorded to next Step attempt (commit, scheduling)"
    CLIENT = "client: send_user_message RPC and seeing the completion"


def _gap_kinds(timeline: Sequence[_Mark]) -> list[_GapKind]:
    """The kind of each gap of ``timeline``; a gap inside a runner call is the runner's."""
    kinds: list[_GapKind] = []
    in_runner = False
    for previous, current in itertools.pairwise(timeline):
        if previous.label.startswith("runner.") and " entered" in previous.label:
            in_runner = True
        elif previous.label.startswith("runner.") and " returned" in previous.label:
            in_runner = False
        sources = (previous.source, current.source)
        if "client" in sources:
            kinds.append(_GapKind.CLIENT)
        elif in_runner:
            kinds.append(_GapKind.RUNNER)
        elif sources == ("worker", "worker") and previous.label.startswith("task received RPC"):
            kinds.append(_GapKind.WORKER_RPC)
        elif sources == ("worker", "worker"):
            kinds.append(_GapKind.WORKER)
        elif sources == ("engine", "worker"):
            kinds.append(_GapKind.DISPATCH)
        elif sources == ("worker", "engine"):
            kinds.append(_GapKind.DELIVERY)
        else:
            kinds.append(_GapKind.ENGINE)
    return kinds


def _kind_medians(timelines: Sequence[list[_Mark]]) -> dict[_GapKind, float]:
    """Per kind, the median over turns of the ms that turn spent in gaps of that kind."""
    totals: dict[_GapKind, list[float]] = {kind: [] for kind in _GapKind}
    for timeline in timelines:
        per_turn = dict.fromkeys(_GapKind, 0.0)
        for (previous, current), kind in zip(
            itertools.pairwise(timeline), _gap_kinds(timeline), strict=True
        ):
            per_turn[kind] += (current.wall_ns - previous.wall_ns) / 1e6
        for kind, value in per_turn.items():
            totals[kind].append(value)
    return {kind: _median(values) for kind, values in totals.items() if values}


def _print_profile(timelines: Sequence[list[_Mark]]) -> None:
    rows = _profile_rows(timelines)
    if not rows:
        return
    print()
    print("profile of one sequential durable turn: median gap between consecutive wall clock marks")
    print("(client, engine history event_time/started_time, Worker marks around model and tool)")
    width = max(len(row[0]) for row in rows)
    for start, end, gap in rows:
        print(f"  {gap:8.2f} ms  {start.ljust(width)} -> {end}")
    print(f"  {sum(row[2] for row in rows):8.2f} ms  total")
    print()
    print("the same turns by where the time goes (median per turn; kinds overlap where Steps run")
    print("in parallel, e.g. CallTool with ResumeTurn.wait_for, so the column need not add up):")
    for kind, value in _kind_medians(timelines).items():
        print(f"  {value:8.2f} ms  {kind.value}")


# --- command line -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchmarkOptions:
    """The parsed command line."""

    turns: int
    warmup: int
    sessions: int
    duration: float
    model_latency_ms: float
    completion: CompletionMode
    poll_interval: float
    profile: bool
    cprofile_worker: bool
    cprofile_engine: bool
    memoize_sdk: bool
    count_messages: bool = False


def _parse_arguments(argv: Sequence[str] | None) -> BenchmarkOptions:
    parser = argparse.ArgumentParser(
        description="Time a durable Stepwise turn against the same runner calls made in process."
    )
    parser.add_argument("--turns", type=int, default=20, help="measured turns (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up turns (default 3)")
    parser.add_argument("--sessions", type=int, default=10, help="concurrent sessions (default 10)")
    parser.add_argument(
        "--duration",
        type=float,
        default=15.0,
        help="seconds the concurrent sessions run turns (default 15)",
    )
    parser.add_argument(
        "--model-latency-ms",
        type=float,
        default=100.0,
        help="asyncio sleep of each model call (default 100)",
    )
    parser.add_argument(
        "--completion",
        choices=[mode.value for mode in CompletionMode],
        default=CompletionMode.RUN_TURN.value,
        help="run-turn: AgentSessionClient.run_turn, the public API (default); state: long-poll "
        "AgentEvents for turn_completed, then read get_agent_state once (the answer from the "
        "turn's text_delta events); events: the same, then the whole snapshot; poll: read the "
        "snapshot every --poll-interval-ms",
    )
    parser.add_argument(
        "--poll-interval-ms",
        type=float,
        default=5.0,
        help="snapshot poll interval (default 5)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also print where a sequential turn's time goes (Worker marks + engine history)",
    )
    parser.add_argument(
        "--cprofile-worker",
        action="store_true",
        help="run the Worker child under cProfile and print its top functions over the "
        "sequential turns (slows the Worker: its timings are not comparable)",
    )
    parser.add_argument(
        "--cprofile-engine",
        action="store_true",
        help="run the engine process under cProfile and print its top functions over the "
        "sequential turns (slows the engine: its timings are not comparable)",
    )
    parser.add_argument(
        "--memoize-sdk",
        action="store_true",
        help="experiment: memoize the SDK codec's typing.get_type_hints and the pull Worker's "
        "sdk_version() in the client and the Worker, to show what they cost (changes no file)",
    )
    parser.add_argument(
        "--count-messages",
        action="store_true",
        help="count the engine's gRPC calls and Worker frames by kind over the measured "
        "sequential turns and print them per turn (engine_message_counts.py; costs engine CPU)",
    )
    arguments = parser.parse_args(argv)
    if arguments.count_messages and arguments.cprofile_engine:
        parser.error("--count-messages and --cprofile-engine both hook the engine: pick one")
    for name in ("turns", "sessions"):
        if getattr(arguments, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(arguments, name)}")
    if arguments.warmup < 0:
        parser.error(f"--warmup must be 0 or more, got {arguments.warmup}")
    for name in ("duration", "model_latency_ms", "poll_interval_ms"):
        if getattr(arguments, name) < 0:
            flag = "--" + name.replace("_", "-")
            parser.error(f"{flag} must be 0 or more, got {getattr(arguments, name)}")
    return BenchmarkOptions(
        turns=arguments.turns,
        warmup=arguments.warmup,
        sessions=arguments.sessions,
        duration=arguments.duration,
        model_latency_ms=arguments.model_latency_ms,
        completion=CompletionMode(arguments.completion),
        poll_interval=arguments.poll_interval_ms / 1000.0,
        profile=arguments.profile,
        cprofile_worker=arguments.cprofile_worker,
        cprofile_engine=arguments.cprofile_engine,
        memoize_sdk=arguments.memoize_sdk,
        count_messages=arguments.count_messages,
    )


def _print_message_counts(durable: DurableFigures, turns: int) -> None:
    """The engine's calls and Worker frames per measured turn, by kind (``--count-messages``)."""
    print(f"engine messages per measured turn (over {turns} turns), by kind:")
    for kind, count in sorted(durable.message_counts.items()):
        size = durable.message_bytes.get(kind)
        per_turn_bytes = f"  {size / count / 1024:6.1f} KiB each" if size and count else ""
        print(f"  {kind:<40} {count / turns:6.2f}{per_turn_bytes}")
    calls = sum(n for kind, n in durable.message_counts.items() if kind.startswith("call "))
    frames = sum(n for kind, n in durable.message_counts.items() if kind.startswith("frame "))
    print(f"  {'all calls / all Worker frames':<40} {calls / turns:6.2f} / {frames / turns:.2f}")
    print()


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _ratio(durable: float, in_process: float) -> str:
    return f"{durable / in_process:.3f}" if in_process > 0 else "n/a (in-process time is 0)"


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def _engine_description() -> str:
    if os.environ.get(DEXCLI_ENV):
        return "dexcli dev --engine zd (durabilityMode processCrashSafe)"
    return "dex-local-engine serve --durability process-crash-safe (the default)"


def _floor_rows(
    durable: DurableFigures, base: float, event_times: Sequence[float], durable_median: float
) -> list[tuple[str, str]]:
    """The floor's medians and what dex-agents adds above it, in the table's units.

    The floor's overhead is measured above its model sleeps as they really took (they wake late,
    as the in-process turn's do), so it compares with the durable turn's overhead above the
    in-process turn.
    """
    floor = durable.floor
    event_overhead, query_overhead = floor.overhead()
    event_share = _ms(_median(event_times) - base - event_overhead) if event_times else "n/a"
    return [
        (
            "same Step shape, empty Steps (turn_shape_floor): last event / query RPC",
            f"{_ms(_median(floor.until_last_event))} / {_ms(_median(floor.until_query))}, "
            f"{_ms(event_overhead)} / {_ms(query_overhead)} above its model sleeps "
            f"({_ms(_median(floor.model_sleeps))})",
        ),
        (
            "  dex-agents' share of the overhead (above that floor): event / snapshot",
            f"{event_share} / {_ms(durable_median - base - query_overhead)}",
        ),
    ]


def _print_report(
    options: BenchmarkOptions, in_process: InProcessFigures, durable: DurableFigures
) -> None:
    snapshot_times = [timing.snapshot_seconds for timing in durable.turns]
    event_times = [t.event_seconds for t in durable.turns if t.event_seconds is not None]
    base = _median(in_process.durations)
    durable_median = _median(snapshot_times)
    fastest, slowest = min(in_process.durations), max(in_process.durations)
    rows: list[tuple[str, str]] = [
        ("in-process turn (2 model calls + 1 tool call), median", _ms(base)),
        ("in-process turn, min / max", f"{_ms(fastest)} / {_ms(slowest)}"),
    ]
    if event_times:
        rows.append(("durable turn until turn_completed read, median", _ms(_median(event_times))))
        rows.append(
            ("ratio durable (turn_completed read) / in-process", _ratio(_median(event_times), base))
        )
    rows += [
        ("durable turn until state or snapshot shows it completed, median", _ms(durable_median)),
        (
            "  first 5 / last 5 measured turns of the session, median",
            f"{_ms(_median(snapshot_times[:5]))} / {_ms(_median(snapshot_times[-5:]))}",
        ),
        (
            "snapshot reads until it showed the turn completed, median / max",
            f"{_median([t.snapshot_reads for t in durable.turns]):g} / "
            f"{max(t.snapshot_reads for t in durable.turns)}",
        ),
        (
            "AgentEvents read per turn (one ReadStream call each), median",
            f"{_median([t.events_read for t in durable.turns]):g}",
        ),
        (
            "durable turn, min / max",
            f"{_ms(min(snapshot_times))} / {_ms(max(snapshot_times))}",
        ),
        ("durable overhead per turn (median - in-process median)", _ms(durable_median - base)),
        (
            f"RATIO durable (snapshot shows it) / in-process (goal <= {GOAL_RATIO:.2f})",
            _ratio(durable_median, base),
        ),
        *_floor_rows(durable, base, event_times, durable_median),
        (
            "CPU per measured turn (load-independent)",
            _cpu_per_turn(durable.turns_cpu_seconds, len(durable.turns))
            + f"; in process {_ms(in_process.cpu_seconds / len(in_process.durations))}",
        ),
        (
            "Step methods of one turn",
            f"{len(durable.steps_per_turn)}: {' > '.join(durable.steps_per_turn)}",
        ),
        (
            "bare health check round trip (engine only), median",
            _ms(_median(durable.health_check_seconds)),
        ),
        (
            "bare get_agent_snapshot RPC (engine + Worker), median",
            _ms(_median(durable.snapshot_rpc_seconds)),
        ),
        (
            f"throughput, {options.sessions} concurrent sessions",
            f"{durable.concurrent_turns / durable.concurrent_seconds:.1f} turns/s "
            f"({durable.concurrent_turns} turns in {durable.concurrent_seconds:.1f} s)",
        ),
        (
            "  turn latency under that load, median",
            _ms(_median(durable.concurrent_latencies)) if durable.concurrent_latencies else "n/a",
        ),
        (
            "  CPU busy during it (share of one core)",
            ", ".join(
                f"{name} {used / durable.concurrent_seconds:.0%}"
                for name, used in durable.concurrent_cpu_seconds.items()
            )
            or "n/a",
        ),
        (
            "  ideal (sessions / in-process turn)",
            f"{options.sessions / base:.1f} turns/s" if base > 0 else "n/a",
        ),
    ]
    width = max(len(label) for label, _ in rows)
    print()
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  {'-' * 40}")
    for label, value in rows:
        print(f"{label.ljust(width)}  {value}")
    print()
    completion = {
        CompletionMode.RUN_TURN: "AgentSessionClient.run_turn (its own reads: see the counts)",
        CompletionMode.STATE: "AgentEvents long-poll for turn_completed, then one "
        "get_agent_state read",
        CompletionMode.EVENTS: "AgentEvents long-poll for turn_completed, then one snapshot read",
    }.get(options.completion, f"snapshot poll every {options.poll_interval * 1000:g} ms")
    if durable.message_counts:
        _print_message_counts(durable, len(durable.turns))
    if durable.worker_cprofile:
        print("Worker child cProfile over the sequential turns:")
        print(durable.worker_cprofile)
    if durable.engine_cprofile:
        print("engine process cProfile over its life up to the end of the sequential turns:")
        print(durable.engine_cprofile)
    if durable.profile:
        _print_profile(durable.profile)
        sizes = ", ".join(mark.label.removeprefix("bytes ") for mark in durable.message_sizes)
        print(f"  Worker task/result bytes of the last turn, in order: {sizes}")
        print()
    print(
        f"command: {shlex.join(['python', *sys.argv])} | turns measured {options.turns} after "
        f"{options.warmup} warm-up | model latency {options.model_latency_ms:g} ms | "
        f"completion: {completion} | engine: {_engine_description()} | Worker: child process "
        f"(python -m {_WORKER_MODULE}) | cores: {os.cpu_count()}, load average "
        f"{_load_average()} at the end | "
        f"{platform.python_implementation()} {platform.python_version()} on {platform.system()}"
        f"{_modifiers(options)}"
    )


def _cpu_per_turn(cpu_seconds: Mapping[str, float], turns: int) -> str:
    if not cpu_seconds:
        return "n/a"
    parts = [f"{name} {_ms(used / turns)}" for name, used in cpu_seconds.items()]
    return ", ".join(parts) + f" (sum {_ms(sum(cpu_seconds.values()) / turns)})"


def _load_average() -> str:
    """The 1-minute load average: other work on the machine skews every figure."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "unknown"


def _modifiers(options: BenchmarkOptions) -> str:
    """What changed the measured code path, so a figure is never read as a plain run's."""
    notes = []
    if options.profile:
        notes.append("--profile marks in the Worker")
    if options.cprofile_worker:
        notes.append("Worker under cProfile (slowed)")
    if options.cprofile_engine:
        notes.append("engine under cProfile (slowed)")
    if options.memoize_sdk:
        notes.append("EXPERIMENT --memoize-sdk: SDK get_type_hints and sdk_version memoized")
    if options.count_messages:
        notes.append("engine counting its messages (slowed)")
    return f" | {'; '.join(notes)}" if notes else ""


async def _run(options: BenchmarkOptions) -> None:
    _progress(f"in-process turns ({options.warmup} warm-up + {options.turns})")
    in_process = await measure_in_process(options.model_latency_ms, options.turns, options.warmup)
    _progress(f"  in-process median {_ms(_median(in_process.durations))}")
    with tempfile.TemporaryDirectory(prefix="dex-agents-session-turns-") as state_dir:
        durable = await measure_durable(options, Path(state_dir))
    _print_report(options, in_process, durable)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table; exit status 0."""
    options = _parse_arguments(argv)
    asyncio.run(_run(options))
    return 0


def _install_profile_hooks() -> None:
    """Mark, in this Worker child only, when the SDK receives a task and writes its result.

    Wraps private methods of the SDK's pull Worker and the runner's two calls; used only with
    ``--profile``, so the measured turns of a normal run go through unwrapped code.
    """
    from dex import _pull_worker

    stream_type = _pull_worker.PullStream
    start_task = stream_type._start_task
    send = stream_type._send

    async def marked_start_task(self: _pull_worker.PullStream, task: pb.PollWorkerTask) -> None:
        name = _task_name(task)
        _mark(f"task received {name}")
        _mark(f"bytes in {name}={task.ByteSize()}")
        await start_task(self, task)

    async def marked_send(self: _pull_worker.PullStream, request: pb.PollWorkerTaskRequest) -> None:
        if request.HasField("task_frame"):
            frame = request.task_frame
            final = frame.HasField("rpc") or any(
                frame.HasField(method) and getattr(frame, method).WhichOneof("output") == "result"
                for method in ("wait_for", "execute")
            )
            if final:
                _mark("result sending")
                _mark(f"bytes result={request.ByteSize()}")
        await send(self, request)

    stream_type._start_task = marked_start_task  # type: ignore[method-assign]
    stream_type._send = marked_send  # type: ignore[method-assign]

    run_model_step = StepwiseAgentRunner.run_model_step
    execute_tool = StepwiseAgentRunner.execute_deferred_tool_call

    async def marked_run_model_step(self: StepwiseAgentRunner, turn: AgentTurnContext) -> object:
        _mark("runner.run_model_step entered")
        try:
            return await run_model_step(self, turn)
        finally:
            _mark("runner.run_model_step returned")

    async def marked_execute_tool(self: StepwiseAgentRunner, call: DeferredToolExecution) -> object:
        _mark("runner.execute_deferred_tool_call entered")
        try:
            return await execute_tool(self, call)
        finally:
            _mark("runner.execute_deferred_tool_call returned")

    StepwiseAgentRunner.run_model_step = marked_run_model_step  # type: ignore[method-assign,assignment]
    StepwiseAgentRunner.execute_deferred_tool_call = marked_execute_tool  # type: ignore[method-assign,assignment]


def _task_name(task: pb.PollWorkerTask) -> str:
    kind = task.WhichOneof("request")
    if kind == "rpc":
        return f"RPC {task.rpc.rpc_name}"
    if kind in ("wait_for", "execute"):
        return f"{getattr(task, kind).step_type}.{kind}"
    return str(kind)


def _memoize_sdk() -> None:
    """Memoize two SDK functions in this process (the --memoize-sdk experiment).

    The SDK 1.23.0 JSON codec calls ``typing.get_type_hints`` for every dataclass it decodes,
    which compiles and evaluates each annotation again, and the pull Worker reads its own package
    metadata (``importlib.metadata.version``) for every pull stream it opens, one per task. Both
    results never change in a process.
    """
    from dex import _pull_worker, codec

    codec.get_type_hints = functools.cache(codec.get_type_hints)  # type: ignore[attr-defined,assignment]
    _pull_worker.sdk_version = functools.cache(_pull_worker.sdk_version)  # type: ignore[attr-defined]


def _serve_worker() -> None:
    latency_ms = float(os.environ.get(_MODEL_LATENCY_ENV, "100"))
    if os.environ.get(_MEMOIZE_SDK_ENV):
        _memoize_sdk()
    if os.environ.get(_MARKS_FILE_ENV):
        _install_profile_hooks()
    cprofile_file = os.environ.get(_CPROFILE_FILE_ENV)
    if cprofile_file:
        start_cprofile(Path(cprofile_file))
    run_agent_worker([build_flow(latency_ms), build_floor_flow(latency_ms)])


if __name__ == "__main__":
    if os.environ.get(SERVER_ADDRESS_ENV) and _MODEL_LATENCY_ENV in os.environ:
        _serve_worker()
    else:
        sys.exit(main())
