"""Benchmark: how fast steering and ``cancel_turn`` take effect.

A real ``dex-local-engine serve`` process and an in-process Worker (``in_process_worker``) run a scripted agent whose
model call blocks until released. It prints the median over ``--rounds`` rounds of:

1. cancel: from calling ``cancel_turn`` during a running model call until the snapshot shows the
   session waiting for a user message again (the call is cancelled, the turn ends);
2. steer: from calling ``steer_user_message`` during a running tool call, releasing the tool at
   once, until the snapshot shows the steered turn's reply (the tool finishes, ``ResumeTurn`` and
   ``ApplyTurnControl`` end the turn, the next turn's model call answers).

Run from the repository root::

    uv run python benchmarks/turn_control.py --rounds 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from dex_agents import (
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.testing import EngineLogs, EngineProcess, in_process_worker


class _BenchRunner:
    """Blocks the model call of a ``cancel`` message and the ``slow`` tool until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.reached = asyncio.Event()

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(MessageRole.USER, json.dumps({"user": text}), text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        last = turn.messages[-1].text or ""
        if last == "cancel":
            self.reached.set()
            await self.release.wait()
        if last == "steer" and not turn.is_resuming:
            call = DeferredToolCall("slow", "slow", "{}", turn.resolve_tool_policy("slow"))
            return ToolCallsRequested("[]", (call,), AgentUsage())
        reply = FrameworkMessage(MessageRole.ASSISTANT, json.dumps({"a": last}), text=f"re {last}")
        return TurnCompleted((reply,), AgentUsage())

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        self.reached.set()
        await self.release.wait()
        return ToolExecutionResult("slow done")


async def _idle_with(sessions: AgentSessionClient, session_id: str, last_text: str | None) -> None:
    while True:
        snapshot = await sessions.get_agent_snapshot(session_id)
        state = snapshot.state
        waiting = state is not None and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
        replied = last_text is None or (
            bool(snapshot.messages) and snapshot.messages[-1].text == last_text
        )
        if waiting and replied:
            return
        await asyncio.sleep(0.002)


async def _round(runner: _BenchRunner, sessions: AgentSessionClient, kind: str) -> float:
    runner.reached.clear()
    runner.release.clear()
    session_id = sessions.flow.get_flow_type() + "-" + str(time.monotonic_ns())
    await sessions.start_session(session_id, kind)
    await runner.reached.wait()
    started = time.perf_counter()
    if kind == "cancel":
        assert await sessions.cancel_turn(session_id, "turn-1")
        await _idle_with(sessions, session_id, None)
        runner.release.set()
    else:
        assert await sessions.steer_user_message(session_id, "steered")
        runner.release.set()
        await _idle_with(sessions, session_id, "re steered")
    return time.perf_counter() - started


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        engine = await EngineProcess.start_local(root / "engine.db", EngineLogs.in_directory(root))
        runner = _BenchRunner()
        options = AgentSessionOptions(tool_policies={"slow": ToolPolicy(ToolEffect.READ)})
        flow = AgentSessionFlow(runner, flow_type="TurnControlBench", options=options)
        try:
            async with in_process_worker([flow], engine.server_address, root / "cache") as dex:
                sessions = dex.sessions(flow)
                results: dict[str, list[float]] = {"cancel": [], "steer": []}
                for _ in range(rounds):
                    for kind in results:
                        results[kind].append(await _round(runner, sessions, kind))
            print(f"{'measure':<48} {'median ms':>10} {'max ms':>8}")
            labels = {
                "cancel": "cancel_turn during a model call -> idle",
                "steer": "steer during a tool call -> steered reply",
            }
            for kind, values in results.items():
                print(
                    f"{labels[kind]:<48} {statistics.median(values) * 1000:>10.1f} "
                    f"{max(values) * 1000:>8.1f}"
                )
        finally:
            await engine.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    asyncio.run(main(parser.parse_args().rounds))
