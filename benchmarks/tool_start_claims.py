"""Benchmark: what a single-attempt tool call's start claim costs (issue 36, case 6).

Two Stepwise agents that differ only in their Worker's Dex client: each turn's model asks for one
``non_idempotent_write`` (no approval), then answers. ``claimed`` is served with
``AgentSessionFlow.use_worker_client`` (what ``dex-agents worker`` and the testing Workers do:
the tool's Step claims its start through the ``claim_tool_attempt`` RPC before the tool starts);
``unclaimed`` has no client, so its Step runs the tool as ``main`` did before start claims. One
local engine (process-crash-safe, its default), one in-process pull Worker serving both, one
session each; turns alternate between the two, so both see the same load.

Per turn it records, on one clock (the Worker is in this process):

- ``model -> tool``: from the model's first reply (the tool request) until the tool starts:
  RunModel's commit, the tool Step's dispatch, its heartbeat and, for ``claimed``, the claim;
- ``turn``: from ``send_user_message`` until ``get_agent_state`` shows the turn ended (polled
  every 2 ms, the same for both).

and prints medians and their difference. Only single-attempt calls claim; ``read`` and
``idempotent_write`` calls (``CallTool``) are unchanged. Nothing asserts a timing. On the shared
2-core machine absolute figures move from run to run; compare the two columns of one run.

Run from the repository root::

    uv run python benchmarks/tool_start_claims.py --turns 60
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from dex import (
    AsyncClient,
    AsyncWorker,
    BlobCacheConfig,
    ClientOptions,
    PullWorkerOptions,
    Registry,
    WorkerOptions,
    WorkerTarget,
    open_blob_cache,
)
from dex_agents import AgentSessionClient, AgentSessionFlow, AgentStatus, ToolEffect
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    function_tool,
    stepwise_agent_session_flow,
)
from dex_agents.testing import EngineLogs, EngineProcess

ARMS = ("claimed", "unclaimed")
_marks: dict[str, float] = {}


def _build_flow(arm: str) -> AgentSessionFlow:
    @function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False, name="refund")
    async def refund(order_id: str) -> str:
        """Refund an order once."""
        _marks[f"{arm}:tool"] = time.perf_counter()
        return f"refunded {order_id}"

    async def respond(request: ModelRequest) -> ScriptedModelReply:
        if not ScriptedModelClient.tool_results(request):
            _marks[f"{arm}:model"] = time.perf_counter()
            return ScriptedModelReply(tool_calls=[ScriptedToolCall("refund", {"order_id": "7"})])
        return ScriptedModelReply(text="done")

    definition = AgentDefinition(
        name=f"claims-{arm}",
        instructions="You refund orders.",
        model=ScriptedModelClient(respond, max_recorded_requests=0),
        tools=[refund],
    )
    return stepwise_agent_session_flow(definition, flow_type=f"ClaimsBenchmark{arm.title()}")


async def _turn(
    sessions: AgentSessionClient, session_id: str, turn: int, send: Callable[[], Awaitable[bool]]
) -> float:
    started = time.perf_counter()
    if not await send():
        raise RuntimeError(f"{session_id}: turn {turn} was not accepted")
    while True:
        state = await sessions.get_agent_state(session_id)
        if (
            state.turn_count >= turn
            and state.active_turn_id is None
            and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
        ):
            if state.last_turn_error:
                raise RuntimeError(f"{session_id}: turn {turn} failed: {state.last_turn_error}")
            return time.perf_counter() - started
        await asyncio.sleep(0.002)


async def run(turns: int, warmup: int) -> None:
    flows = {arm: _build_flow(arm) for arm in ARMS}
    with tempfile.TemporaryDirectory(prefix="claims-benchmark-") as directory:
        root = Path(directory)
        engine = await EngineProcess.start_local(
            root / "engine.db", EngineLogs.in_directory(root, "engine")
        )
        cache = open_blob_cache(BlobCacheConfig(str(root / "cache"), 64 * 1024 * 1024))
        registry = Registry(list(flows.values()), allow_async_handlers=True)
        # Only the claimed arm's Flow gets a Worker client, as your own AsyncWorker would give it.
        flows["claimed"].use_worker_client(
            AsyncClient(registry, cache, ClientOptions(server_address=engine.server_address))
        )
        worker = AsyncWorker(
            registry,
            cache,
            WorkerOptions(
                server_address=engine.server_address,
                pull=PullWorkerOptions(max_concurrent_tasks=8),
            ),
        )
        client = AsyncClient(
            registry,
            cache,
            ClientOptions(
                server_address=engine.server_address, worker_target=WorkerTarget(pull=True)
            ),
        )
        serving = asyncio.create_task(worker.start())
        try:
            await worker.wait_pull_registered()
            figures = await _alternate(flows, client, turns, warmup)
        finally:
            await worker.stop()
            await serving
            await engine.stop()
            cache.close()
    _print(figures, turns, warmup)


async def _alternate(
    flows: dict[str, AgentSessionFlow], client: AsyncClient, turns: int, warmup: int
) -> dict[str, dict[str, list[float]]]:
    figures: dict[str, dict[str, list[float]]] = {
        arm: {"model -> tool": [], "turn": []} for arm in ARMS
    }
    sessions = {arm: AgentSessionClient(client, flow) for arm, flow in flows.items()}
    for turn in range(1, turns + warmup + 1):
        order = ARMS if turn % 2 else tuple(reversed(ARMS))
        for arm in order:
            session_id = f"claims-{arm}"
            if turn == 1:
                send = _start(sessions[arm], session_id)
            else:
                send = _send(sessions[arm], session_id)
            elapsed = await _turn(sessions[arm], session_id, turn, send)
            if turn > warmup:
                figures[arm]["turn"].append(elapsed)
                figures[arm]["model -> tool"].append(_marks[f"{arm}:tool"] - _marks[f"{arm}:model"])
    return figures


def _start(sessions: AgentSessionClient, session_id: str) -> Callable[[], Awaitable[bool]]:
    async def send() -> bool:
        await sessions.start_session(session_id, "refund order 7")
        return True

    return send


def _send(sessions: AgentSessionClient, session_id: str) -> Callable[[], Awaitable[bool]]:
    return lambda: sessions.send_user_message(session_id, "refund order 7")


def _print(figures: dict[str, dict[str, list[float]]], turns: int, warmup: int) -> None:
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"load average {load}; {turns} turns per arm after {warmup} warm-up, alternating")
    print(f"{'median ms':<16}{'claimed':>10}{'unclaimed':>12}{'difference':>12}")
    for measure in ("model -> tool", "turn"):
        claimed = statistics.median(figures["claimed"][measure]) * 1000
        unclaimed = statistics.median(figures["unclaimed"][measure]) * 1000
        print(f"{measure:<16}{claimed:>10.1f}{unclaimed:>12.1f}{claimed - unclaimed:>+12.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60, help="measured turns per arm")
    parser.add_argument("--warmup", type=int, default=3, help="turns per arm not measured")
    arguments = parser.parse_args()
    asyncio.run(run(arguments.turns, arguments.warmup))


if __name__ == "__main__":
    main()
