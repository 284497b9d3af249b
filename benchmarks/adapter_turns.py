"""Benchmark: a durable turn of one runner's agent against the same agent run in process.

``--framework`` names the runner (``stepwise``, ``openai-agents``, ``pydantic-ai``, ``langgraph``,
``google-adk``, ``claude-agent-sdk``, ``strands``); its agent comes from ``adapter_agents/<runner>.py`` (see
``adapter_agents/__init__.py``): one READ tool, a model that sleeps ``--model-latency-ms`` on every
call, so a turn is two model calls and one tool call.

It prints:

1. the in-process turn: the framework runs the agent itself, no engine; median over ``--turns``
   turns after ``--warmup``;
2. the durable turn: a ``dex-local-engine serve`` process and a Worker child process, each turn
   one ``AgentSessionClient.run_turn`` (what a user of the public API calls: it sends the
   message, follows the AgentEvents Stream and reads the turn's end); median over the same
   counts, all turns in one session. ``--client events-snapshot`` drives the turn the way this
   script did before ``run_turn`` read only the turn's messages: ``send_user_message``, every
   event until ``turn_completed``, then ``get_agent_snapshot`` until it shows the turn ended;
3. the durable overhead per turn and the ratio durable / in process;
4. CPU per turn of each side: user + system CPU of this process and every process under it (the
   engine and the Worker child on the durable side), children that ended and were reaped
   included (the Claude Code CLI that each Claude Agent SDK turn starts and kills), which other
   load on the machine hardly changes, and of the Worker child alone (with its reaped children);
5. with at least 20 measured turns, growth: the first 10 against the last 10 measured turns of
   the one session (median turn, overhead, CPU per turn of each side): does a turn cost more as
   the session grows? (``--turns 100 --warmup 0``: turns 1 to 10 against 91 to 100.)

``--cprofile-worker`` runs the Worker child under cProfile over all its turns and prints its
top functions. ``--count-messages`` prints the engine's messages per measured turn by kind and
frame size, as ``session_turns.py --count-messages`` does (counting costs engine CPU).

``--shape read-write`` runs ``peers.py``'s turn instead (``TurnShape.READ_WRITE``: after the lookup a
non-idempotent write, then a third model call); ``time_turns`` and ``measure_durable`` also serve
``peers.py`` itself.

Run from the repository root::

    uv run python benchmarks/adapter_turns.py --framework langgraph
    uv run python benchmarks/adapter_turns.py --framework stepwise --turns 30 --model-latency-ms 100
    uv run python benchmarks/adapter_turns.py --framework pydantic-ai --turns 100 --warmup 0
    uv run python benchmarks/adapter_turns.py --framework pydantic-ai --shape read-write --cprofile-worker
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import importlib
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Final

from adapter_agents import FINAL_PREFIX, USER_TEXT, BenchmarkAgent, TurnShape
from dex import AsyncClient, LongPollTimeoutError
from dex_agents import AgentEventType, AgentSessionClient, AgentStatus
from dex_agents.testing import SERVER_ADDRESS_ENV, AgentTestStack, run_agent_worker
from engine_message_counts import (
    COUNTS_FILE_ENV,
    engine_hook_environment,
    install_hook,
    read_counts,
)
from worker_cprofile import collect_cprofile, start_cprofile

_FRAMEWORK_ENV: Final = "DEX_AGENTS_BENCHMARK_FRAMEWORK"
_MODEL_LATENCY_ENV: Final = "DEX_AGENTS_BENCHMARK_MODEL_LATENCY_MS"
_SHAPE_ENV: Final = "DEX_AGENTS_BENCHMARK_TURN_SHAPE"
# With --cprofile-worker the Worker child runs under cProfile and writes its statistics here when
# it gets SIGUSR1 (after the measured turns).
_CPROFILE_FILE_ENV: Final = "DEX_AGENTS_BENCHMARK_CPROFILE_FILE"
_BENCHMARK_DIR: Final = Path(__file__).resolve().parent
_SESSION_ID: Final = "adapter-turns"
_READ_WAIT: Final = timedelta(seconds=5)
_TURN_TIMEOUT_SECONDS: Final = 120.0


def load_agent(
    framework: str, model_latency_ms: float, shape: TurnShape = TurnShape.READ
) -> BenchmarkAgent:
    """The benchmark agent of ``framework``, from ``adapter_agents/<framework>.py``.

    Raises:
        SystemExit: No such module, its framework is not installed, or it has no agent of
            ``shape``.
    """
    module_name = "adapter_agents." + framework.replace("-", "_")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as missing:
        known = sorted(
            path.stem
            for path in (_BENCHMARK_DIR / "adapter_agents").glob("*.py")
            if not path.stem.startswith("_")
        )
        raise SystemExit(
            f"cannot load the benchmark agent of {framework!r} ({missing}); "
            f"known frameworks: {', '.join(k.replace('_', '-') for k in known)}"
        ) from missing
    if shape is TurnShape.READ:
        agent: BenchmarkAgent = module.build_benchmark_agent(model_latency_ms / 1000.0)
        return agent
    try:
        agent = module.build_benchmark_agent(model_latency_ms / 1000.0, shape)
    except TypeError as unsupported:
        raise SystemExit(
            f"the benchmark agent of {framework!r} has no {shape.value!r} turn ({unsupported})"
        ) from unsupported
    return agent


class DurableClient(StrEnum):
    """How the benchmark's client drives and waits for a durable turn."""

    RUN_TURN = "run-turn"
    """``AgentSessionClient.run_turn``, as a user of the public API does."""
    EVENTS_SNAPSHOT = "events-snapshot"
    """``send_user_message``, every event to the turn's end, then snapshots until it shows it."""


@dataclass(frozen=True)
class Options:
    framework: str
    turns: int
    warmup: int
    model_latency_ms: float
    shape: TurnShape = TurnShape.READ
    cprofile_worker: bool = False
    client: DurableClient = DurableClient.RUN_TURN
    count_messages: bool = False


@dataclass(frozen=True)
class MeasuredTurns:
    """The measured turns (after the warm-up) of one run.

    Attributes:
        durations: Wall seconds of each turn.
        cpu_seconds: CPU seconds (user + system) that this process and every process under it
            (engine, Worker, a peer's server) used over those turns: hardly changed by other work
            sharing the machine, unlike the wall time.
        worker_cpu_seconds: The part of ``cpu_seconds`` that the Worker child used (durable
            turns of ``measure_durable``), else None.
        worker_cprofile: The Worker child's cProfile text (``--cprofile-worker``), else "".
        engine_messages: The engine's messages by kind over the measured turns, and their
            serialized bytes by kind (``--count-messages``), else empty.
        turn_cpu_seconds: The CPU seconds of each turn, as ``cpu_seconds`` counts them (the
            kernel counts in ticks, so read windows of turns, not one).
    """

    durations: list[float]
    cpu_seconds: float
    worker_cpu_seconds: float | None = None
    worker_cprofile: str = ""
    turn_cpu_seconds: list[float] = field(default_factory=list)
    engine_messages: tuple[Counter[str], Counter[str]] = field(
        default_factory=lambda: (Counter(), Counter())
    )


def process_tree_cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds so far of ``pid`` (default: this process) and its descendants.

    Reads ``/proc``. A descendant that ended counts once its parent has reaped it (the parent's
    ``cutime`` and ``cstime``), as the Claude Code CLI of a turn does, started and SIGKILLed
    within the turn; one not reaped by then counts as 0.
    """
    pid = os.getpid() if pid is None else pid
    proc = Path("/proc") / str(pid)
    try:
        fields = (proc / "stat").read_text().rpartition(")")[2].split()
        children = [
            int(child)
            for task in (proc / "task").iterdir()
            for child in (task / "children").read_text().split()
        ]
    except OSError:
        return 0.0
    # utime, stime, cutime and cstime (reaped children) are fields 14 to 17 of stat(5); the split
    # starts at field 3.
    own = sum(int(field) for field in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return own + sum(process_tree_cpu_seconds(child) for child in children)


async def time_turns(
    run_turn: Callable[[str], Awaitable[str]], options: Options, label: str | None = None
) -> MeasuredTurns:
    """Time each turn of ``run_turn``, each answer checked, and the CPU of the measured ones.

    With a ``label``, prints a progress line after each turn.

    Raises:
        RuntimeError: A turn answered something other than the benchmark's final answer.
    """
    durations: list[float] = []
    turn_cpu: list[float] = []
    cpu_mark = 0.0  # read when the measured turns begin
    for index in range(options.warmup + options.turns):
        if index == options.warmup:
            cpu_mark = process_tree_cpu_seconds()
        started = time.perf_counter()
        answer = await run_turn(USER_TEXT)
        elapsed = time.perf_counter() - started
        if not answer.startswith(FINAL_PREFIX):
            raise RuntimeError(f"the {label or 'in-process'} turn answered {answer!r}")
        if index >= options.warmup:
            durations.append(elapsed)
            # One read a turn: the CPU since the previous read is this turn's.
            now = process_tree_cpu_seconds()
            turn_cpu.append(now - cpu_mark)
            cpu_mark = now
        if label:
            _progress(f"{label} turn {index + 1}: {elapsed * 1000:.1f} ms")
    return MeasuredTurns(durations, sum(turn_cpu), turn_cpu_seconds=turn_cpu)


async def measure_in_process(agent: BenchmarkAgent, options: Options) -> MeasuredTurns:
    """The measured in-process turns."""
    return await time_turns(agent.run_in_process, options)


async def _read_until_turn_ended(
    client: AsyncClient, sessions: AgentSessionClient, turn: int, token: str
) -> str:
    """Follow the AgentEvents Stream until turn ``turn`` ends; returns the next resume token."""
    turn_id = f"turn-{turn}"
    while True:
        try:
            message = await client.read_stream(
                _SESSION_ID, sessions.flow.agent_events, token, _READ_WAIT
            )
        except LongPollTimeoutError:
            continue
        token = message.resume_token
        event = message.value
        if event.turn_id == turn_id and event.type in (
            AgentEventType.TURN_COMPLETED,
            AgentEventType.TURN_FAILED,
        ):
            return token


async def _wait_for_snapshot(sessions: AgentSessionClient, turn: int) -> str:
    """Poll the snapshot until it shows turn ``turn`` ended; the turn's answer.

    Its events are written while the Step runs, so ``turn_completed`` can arrive just before the
    Step's commit.

    Raises:
        RuntimeError: The turn did not end waiting for the next user message, or failed.
    """
    while True:
        snapshot = await sessions.get_agent_snapshot(_SESSION_ID)
        state = snapshot.state
        if state is not None and state.turn_count >= turn and state.active_turn_id is None:
            break
        await asyncio.sleep(0.002)
    answer = snapshot.messages[-1].text if snapshot.messages else None
    if (
        state.turn_count != turn
        or state.status is not AgentStatus.WAITING_FOR_USER_MESSAGE
        or state.last_turn_error
    ):
        raise RuntimeError(f"durable turn {turn} did not complete as expected: {state}, {answer!r}")
    return answer or ""


@contextlib.asynccontextmanager
async def benchmark_stack(
    agent: BenchmarkAgent,
    options: Options,
    state_dir: Path,
    extra_worker_env: Mapping[str, str] | None = None,
    counts_file: Path | None = None,
) -> AsyncIterator[tuple[AgentTestStack, int]]:
    """A fresh engine (as ``dex-local-engine serve`` runs it) and a Worker child serving
    ``agent`` (this module, with ``options``' framework, model latency and turn shape); yields
    the stack and the Worker child's PID. With ``counts_file`` the engine counts its messages
    (``engine_message_counts.py``; read them with :func:`read_counts`)."""
    worker_env = {
        _FRAMEWORK_ENV: options.framework,
        _MODEL_LATENCY_ENV: repr(options.model_latency_ms),
        _SHAPE_ENV: options.shape.value,
        **(extra_worker_env or {}),
    }
    stack = AgentTestStack(
        state_dir,
        [agent.flow],
        "adapter_turns",
        worker_cwd=_BENCHMARK_DIR,
        worker_env=worker_env,
        warm_engine=False,
    )
    async with contextlib.AsyncExitStack() as exits:
        if counts_file is None:
            await exits.enter_async_context(stack)
        else:
            hook_dir = install_hook(state_dir / "engine-count-hook")
            with engine_hook_environment(hook_dir, COUNTS_FILE_ENV, counts_file):
                await exits.enter_async_context(stack)
        worker = await stack.start_worker()
        yield stack, worker.process.pid


async def measure_durable(
    agent: BenchmarkAgent, options: Options, state_dir: Path
) -> MeasuredTurns:
    """The measured durable turns, against a fresh engine and Worker child, all in one session."""
    cprofile_file = state_dir / "worker.cprofile"
    extra_env = {_CPROFILE_FILE_ENV: str(cprofile_file)} if options.cprofile_worker else {}
    counts_file = state_dir / "engine-message-counts.json" if options.count_messages else None
    async with benchmark_stack(agent, options, state_dir, extra_env, counts_file) as (
        stack,
        worker_pid,
    ):
        count_now = (
            functools.partial(read_counts, _engine_pid(stack), counts_file)
            if counts_file is not None
            else None
        )
        counted_from: tuple[Counter[str], Counter[str]] = (Counter(), Counter())
        worker_cpu_started = 0.0
        sessions = stack.sessions(agent.flow)
        if options.client is DurableClient.RUN_TURN:
            drive = public_run_turn(sessions, _SESSION_ID)
        else:
            drive = _events_then_snapshot(stack.client, sessions)
        turn = 0

        async def run_turn(text: str) -> str:
            nonlocal turn, worker_cpu_started, counted_from
            turn += 1
            if turn == options.warmup + 1:
                if count_now is not None:
                    counted_from = count_now()
                worker_cpu_started = process_tree_cpu_seconds(worker_pid)
            return await drive(text)

        measured = await time_turns(run_turn, options, f"{options.framework}: durable")
        worker_cpu = process_tree_cpu_seconds(worker_pid) - worker_cpu_started
        if count_now is not None:
            counted_to = count_now()
            measured = dataclasses.replace(
                measured,
                engine_messages=(
                    counted_to[0] - counted_from[0],
                    counted_to[1] - counted_from[1],
                ),
            )
        cprofile_text = ""
        if options.cprofile_worker:
            cprofile_text = await collect_cprofile(worker_pid, cprofile_file)
        return dataclasses.replace(
            measured, worker_cpu_seconds=worker_cpu, worker_cprofile=cprofile_text
        )


def _engine_pid(stack: AgentTestStack) -> int:
    # AgentTestStack does not expose its engine's process; only the counting hook needs it.
    engine = stack._engine
    if engine is None:
        raise RuntimeError("the benchmark stack started no engine of its own")
    return engine.process.pid


def public_run_turn(
    sessions: AgentSessionClient, session_id: str
) -> Callable[[str], Awaitable[str]]:
    """Each turn of session ``session_id`` one ``run_turn`` (the first one starts the session);
    the turn's answer."""

    async def run_turn(text: str) -> str:
        result = await sessions.run_turn(session_id, text, timeout=_TURN_TIMEOUT_SECONDS)
        if not result.completed:
            raise RuntimeError(f"durable turn {result.turn_id} did not complete: {result}")
        return result.text or ""

    return run_turn


def _events_then_snapshot(
    client: AsyncClient, sessions: AgentSessionClient
) -> Callable[[str], Awaitable[str]]:
    """Each turn sent, followed event by event to its end, then confirmed by snapshots."""
    turn = 0
    token = ""

    async def run_turn(text: str) -> str:
        nonlocal turn, token
        turn += 1
        if turn == 1:
            await sessions.start_session(_SESSION_ID, text)
        elif not await sessions.send_user_message(_SESSION_ID, text):
            raise RuntimeError("the session refused the user message")
        async with asyncio.timeout(_TURN_TIMEOUT_SECONDS):
            token = await _read_until_turn_ended(client, sessions, turn, token)
            return await _wait_for_snapshot(sessions, turn)

    return run_turn


_SHAPE_TEXT: Final = {
    TurnShape.READ: "two model calls and one tool call",
    TurnShape.READ_WRITE: "three model calls and two tool calls (a read, a non-idempotent write)",
}


def _progress(text: str) -> None:
    print(f"... {text}", file=sys.stderr, flush=True)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def print_report(options: Options, in_process: MeasuredTurns, durable: MeasuredTurns) -> None:
    local = statistics.median(in_process.durations)
    remote = statistics.median(durable.durations)
    print(
        f"adapter_turns: framework={options.framework} model_latency={options.model_latency_ms:g}"
        f" ms turns={options.turns} (+{options.warmup} warm-up), {_SHAPE_TEXT[options.shape]}"
        f" per turn, client {options.client.value}"
    )
    print(f"{'in-process turn (median)':<34}{_ms(local):>12}")
    print(f"{'durable turn (median)':<34}{_ms(remote):>12}")
    print(f"{'durable overhead per turn':<34}{_ms(remote - local):>12}")
    print(f"{'durable p90':<34}{_ms(statistics.quantiles(durable.durations, n=10)[-1]):>12}")
    for name, measured in (("in-process", in_process), ("durable", durable)):
        per_turn = measured.cpu_seconds / len(measured.durations)
        print(f"{name + ' CPU per turn (all processes)':<34}{_ms(per_turn):>12}")
    if durable.worker_cpu_seconds is not None:
        per_turn = durable.worker_cpu_seconds / len(durable.durations)
        print(f"{'durable CPU per turn (Worker)':<34}{_ms(per_turn):>12}")
    print(f"RATIO durable/in-process: {remote / local:.3f}")
    _print_growth(in_process, durable)
    print(f"load average: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    if durable.engine_messages[0]:
        _print_engine_messages(durable)
    if durable.worker_cprofile:
        print("\nWorker child cProfile over the durable turns:\n" + durable.worker_cprofile)


def _print_engine_messages(durable: MeasuredTurns) -> None:
    """Per measured turn: each kind of message the engine handled, and a frame's size."""
    counts, sizes = durable.engine_messages
    turns = len(durable.durations)
    print("engine messages per turn (counted, so this run's times are not comparable):")
    for kind in sorted(counts):
        size = f"{sizes[kind] / counts[kind] / 1024:8.1f} KiB each" if sizes[kind] else ""
        print(f"  {kind:<34}{counts[kind] / turns:8.2f}{size}")


_GROWTH_WINDOW = 10
"""Turns at each end of the measured ones that the growth lines compare."""


def _print_growth(in_process: MeasuredTurns, durable: MeasuredTurns) -> None:
    """The first and the last ``_GROWTH_WINDOW`` measured turns side by side: does a turn cost
    more as the session grows? Only with at least twice that many measured turns."""
    window = _GROWTH_WINDOW
    if min(len(in_process.durations), len(durable.durations)) < 2 * window:
        return

    def ends(values: list[float], reduce: Callable[[list[float]], float]) -> tuple[float, float]:
        return reduce(values[:window]), reduce(values[-window:])

    local = ends(in_process.durations, statistics.median)
    remote = ends(durable.durations, statistics.median)
    overhead = (remote[0] - local[0], remote[1] - local[1])
    cpu_local = ends(in_process.turn_cpu_seconds, statistics.fmean)
    cpu_remote = ends(durable.turn_cpu_seconds, statistics.fmean)
    cpu_above = (cpu_remote[0] - cpu_local[0], cpu_remote[1] - cpu_local[1])
    print(f"growth: first {window} / last {window} measured turns")
    for name, (first, last) in (
        ("in-process turn (median)", local),
        ("durable turn (median)", remote),
        ("durable overhead", overhead),
        ("in-process CPU per turn", cpu_local),
        ("durable CPU per turn", cpu_remote),
        ("durable CPU above in-process", cpu_above),
    ):
        print(f"  {name:<32}{_ms(first):>10} /{_ms(last):>10}  {growth_ratio(first, last)}")


def growth_ratio(early: float, late: float) -> str:
    """``late / early`` as printed, or "-" where it says nothing: a difference (an overhead, CPU
    above in process) that is zero or negative on either side has no meaningful ratio."""
    return f"{late / early:.2f}x" if early > 0 and late > 0 else "-"


async def run(options: Options) -> None:
    agent = load_agent(options.framework, options.model_latency_ms, options.shape)
    _progress(f"{options.framework}: in-process turns")
    in_process = await measure_in_process(agent, options)
    with tempfile.TemporaryDirectory(prefix="adapter-turns-") as state_dir:
        _progress(f"{options.framework}: durable turns (engine and Worker child)")
        durable = await measure_durable(agent, options, Path(state_dir))
    print_report(options, in_process, durable)


def _parse(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--framework", default="stepwise", help="the runner (default stepwise)")
    parser.add_argument("--turns", type=int, default=20, help="measured turns (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up turns (default 3)")
    parser.add_argument(
        "--model-latency-ms", type=float, default=100.0, help="model sleep per call (default 100)"
    )
    parser.add_argument(
        "--shape",
        type=TurnShape,
        choices=list(TurnShape),
        default=TurnShape.READ,
        help="read: a lookup, two model calls (default); read-write: then a non-idempotent "
        "write and a third model call, peers.py's turn",
    )
    parser.add_argument(
        "--cprofile-worker",
        action="store_true",
        help="run the Worker child under cProfile (warm-up turns included) and print its top functions",
    )
    parser.add_argument(
        "--client",
        type=DurableClient,
        choices=list(DurableClient),
        default=DurableClient.RUN_TURN,
        help="how the durable turn is driven (default run-turn, the public API)",
    )
    parser.add_argument(
        "--count-messages",
        action="store_true",
        help="count the engine's messages per turn by kind and size (costs engine CPU: compare "
        "no times of such a run)",
    )
    arguments = parser.parse_args(argv)
    if arguments.turns < 2 or arguments.warmup < 0 or arguments.model_latency_ms < 0:
        parser.error("--turns must be at least 2, --warmup and --model-latency-ms not negative")
    return Options(
        arguments.framework,
        arguments.turns,
        arguments.warmup,
        arguments.model_latency_ms,
        arguments.shape,
        cprofile_worker=arguments.cprofile_worker,
        client=arguments.client,
        count_messages=arguments.count_messages,
    )


def main(argv: Sequence[str] | None = None) -> int:
    asyncio.run(run(_parse(argv)))
    return 0


def _serve_worker() -> None:
    agent = load_agent(
        os.environ[_FRAMEWORK_ENV],
        float(os.environ[_MODEL_LATENCY_ENV]),
        TurnShape(os.environ.get(_SHAPE_ENV, TurnShape.READ.value)),
    )
    cprofile_file = os.environ.get(_CPROFILE_FILE_ENV)
    if cprofile_file:
        start_cprofile(Path(cprofile_file))
    run_agent_worker([agent.flow])


if __name__ == "__main__":
    if os.environ.get(SERVER_ADDRESS_ENV) and _FRAMEWORK_ENV in os.environ:
        _serve_worker()
    else:
        sys.exit(main())
