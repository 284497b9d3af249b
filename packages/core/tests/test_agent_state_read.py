"""``get_agent_state``: the session's turn state alone, against the real engine and a pull Worker.

A Stepwise agent whose model waits on a gate for the second turn, so the test can read the state
while a turn runs, then after it ended, and compare it with the snapshot's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dex import (
    BlobCacheConfig,
    Client,
    ClientOptions,
    FlowNotActiveOrNotFoundError,
    Registry,
    WorkerTarget,
    open_blob_cache,
)
from dex_agents import (
    AgentSessionClient,
    AgentSessionFlow,
    AgentState,
    AgentStatus,
    SyncAgentSessionClient,
    agent_codec_registry,
)
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    stepwise_agent_session_flow,
)
from dex_agents.testing import InProcessWorker
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory


@dataclass(frozen=True)
class _Gate:
    """One test's hold on its model, which sets ``model_waiting`` on a "wait" message, then waits
    for ``release`` (the in-process Worker runs the model in the test's event loop)."""

    model_waiting: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


def _flow(gate: _Gate) -> AgentSessionFlow:
    async def reply(request: ModelRequest) -> ScriptedModelReply:
        text = ScriptedModelClient.user_texts(request)[-1]
        if "wait" in text:
            gate.model_waiting.set()
            await gate.release.wait()
        return ScriptedModelReply(text=f"You said: {text}")

    agent = AgentDefinition(
        name="echo", instructions="Echo the user.", model=ScriptedModelClient(reply)
    )
    return stepwise_agent_session_flow(agent, flow_type="AgentStateReadAgent")


@pytest.fixture
def gate() -> _Gate:
    return _Gate()


@pytest.fixture
async def sessions(
    dex_in_process_worker: InProcessWorkerFactory, gate: _Gate
) -> AsyncIterator[tuple[AgentSessionClient, InProcessWorker]]:
    flow = _flow(gate)
    async with dex_in_process_worker([flow]) as dex:
        yield dex.sessions(flow), dex
        gate.release.set()


async def test_agent_state_follows_the_turn_and_matches_the_snapshot(
    sessions: tuple[AgentSessionClient, InProcessWorker], gate: _Gate
) -> None:
    client, _ = sessions
    first = await client.run_turn("s1", "hello", timeout=60)
    assert first.completed
    state = await client.get_agent_state("s1")
    assert isinstance(state, AgentState)
    assert (state.status, state.active_turn_id, state.turn_count) == (
        AgentStatus.WAITING_FOR_USER_MESSAGE,
        None,
        1,
    )
    assert state == (await client.get_agent_snapshot("s1")).state

    token = await client.latest_event_token("s1")
    assert await client.send_user_message("s1", "please wait")
    await asyncio.wait_for(gate.model_waiting.wait(), 60)
    running = await client.get_agent_state("s1")
    assert (running.status, running.active_turn_id, running.turn_count) == (
        AgentStatus.RUNNING_MODEL,
        "turn-2",
        2,
    )
    assert running.last_message_sequence > state.last_message_sequence
    gate.release.set()
    finished = await client.wait_for_turn("s1", token, turn_id="turn-2", timeout=60)
    assert finished.completed
    after = await client.get_agent_state("s1")
    assert (after.active_turn_id, after.turn_count) == (None, 2)
    assert after == (await client.get_agent_snapshot("s1")).state


async def test_agent_state_of_an_unknown_session_is_not_found(
    sessions: tuple[AgentSessionClient, InProcessWorker],
) -> None:
    client, _ = sessions
    with pytest.raises(FlowNotActiveOrNotFoundError):
        await client.get_agent_state("no-such-session")


async def test_the_sync_client_reads_the_same_state(
    sessions: tuple[AgentSessionClient, InProcessWorker], tmp_path: Path
) -> None:
    client, dex = sessions
    assert (await client.run_turn("s1", "hello", timeout=60)).completed
    flow = _flow(_Gate())
    registry = Registry([flow], agent_codec_registry(), allow_async_handlers=True)
    cache = open_blob_cache(BlobCacheConfig(str(tmp_path / "sync-cache"), 16 * 1024 * 1024))
    options = ClientOptions(
        server_address=dex.server_address, worker_target=WorkerTarget(pull=True)
    )
    sync_client = Client(registry, cache, options)
    try:
        sync_sessions = SyncAgentSessionClient(sync_client, flow)
        state = await asyncio.to_thread(sync_sessions.get_agent_state, dex.scoped("s1"))
        assert state == await client.get_agent_state("s1")
        assert state.turn_count == 1
    finally:
        await asyncio.to_thread(sync_client.close)
        cache.close()
