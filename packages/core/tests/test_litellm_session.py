"""Durable sessions on LiteLLMModelClient: a Worker child process, the local engine, and a local
server speaking each provider's wire protocol."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import litellm_test_support
import pytest
from dex_agents.testing import turn_ended

pytest.importorskip("litellm", reason="the litellm extra (dex-agents[litellm]) is not installed")

from dex_agents import AgentSessionClient, AgentSnapshot, MessageRole
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    WorkerProcess,
    wait_for_agent_snapshot,
    wait_until,
)
from litellm_test_support.agent import BASE_URL_ENV, MODELS, build_flows
from litellm_test_support.fake_providers import (
    FakeFailure,
    FakeProviderServer,
    FakeReply,
    FakeStall,
    FakeToolCall,
)
from warm_workers import forked_from_a_warm_parent

TESTS_DIR = Path(__file__).resolve().parent
# One xdist worker runs them all, so one warm parent forks every Worker (worker_preload_env).
pytestmark = pytest.mark.xdist_group("litellm-session-worker")
CALL = FakeToolCall("call_7", "lookup_order", {"order_id": "7"})


@dataclass
class _Script:
    """The fake model: a tool call, then an answer; special user texts fail or stall."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    seen: dict[str, int] = field(default_factory=dict)

    def __call__(self, api: str, body: dict[str, Any]) -> FakeReply | FakeFailure | FakeStall:
        text = str(body)
        for trigger in ("flaky 429", "always 500", "stall"):
            if trigger in text:
                self.seen[trigger] = self.seen.get(trigger, 0) + 1
                count = self.seen[trigger]
                if trigger == "always 500":
                    return FakeFailure(status=500)
                if trigger == "flaky 429" and count == 1:
                    return FakeFailure(status=429)
                if trigger == "stall" and count == 1:
                    return FakeStall(FakeReply(text="Partial text that never ends"), self.release)
                return FakeReply(text="Recovered.")
        if "ships tomorrow" in text:
            return FakeReply(text="Order 7 ships tomorrow.")
        return FakeReply(text="Checking.", reasoning="Look it up first.", tool_calls=(CALL,))


@dataclass
class _Stack:
    stack: AgentTestStack
    sessions: dict[str, AgentSessionClient]
    worker: WorkerProcess
    provider: FakeProviderServer
    script: _Script

    async def turn_end(self, flow_type: str, session_id: str) -> AgentSnapshot:
        return await wait_for_agent_snapshot(
            self.sessions[flow_type],
            session_id,
            turn_ended(1),
            "the turn to end",
            timeout=120,
        )


@pytest.fixture
async def litellm_stack(tmp_path: Path) -> AsyncIterator[_Stack]:
    script = _Script()
    async with FakeProviderServer(script) as provider:
        flows = build_flows(provider.base_url)
        async with AgentTestStack(
            tmp_path,
            flows,
            "litellm_test_support.worker",
            worker_cwd=TESTS_DIR,
            worker_env={
                BASE_URL_ENV: provider.base_url,
                **litellm_test_support.OFFLINE_ENVIRONMENT,
            },
            # Each Worker forks from one warm parent per test process instead of importing again.
            worker_preload_env={},
        ) as stack:
            worker = await stack.start_worker()
            assert forked_from_a_warm_parent(worker)  # its module's preload_worker() works
            sessions = {flow.get_flow_type(): stack.sessions(flow) for flow in flows}
            try:
                yield _Stack(stack, sessions, worker, provider, script)
            finally:
                script.release.set()


def _assistant_texts(snapshot: AgentSnapshot) -> list[str]:
    return [m.text or "" for m in snapshot.messages if m.role == MessageRole.ASSISTANT and m.text]


async def test_a_durable_session_with_a_tool_call_through_each_api(litellm_stack: _Stack) -> None:
    for flow_type in MODELS:
        await litellm_stack.sessions[flow_type].start_session(
            f"order-{flow_type}", "Where is order 7?"
        )
    for flow_type in MODELS:
        snapshot = await litellm_stack.turn_end(flow_type, f"order-{flow_type}")
        assert _assistant_texts(snapshot) == ["Checking.", "Order 7 ships tomorrow."], flow_type
        tool_outputs = [m.tool_output for m in snapshot.messages if m.role == MessageRole.TOOL]
        assert tool_outputs == ["Order 7 ships tomorrow"]
        assert snapshot.usage.model_calls == 2 and snapshot.usage.input_tokens > 0
    assert len(litellm_stack.provider.requests) == 2 * len(MODELS)


async def test_a_worker_killed_mid_stream_repeats_only_that_model_call(
    litellm_stack: _Stack,
) -> None:
    sessions = litellm_stack.sessions["AnthropicAgent"]
    await sessions.start_session("stall", "stall here")
    await wait_until(
        "the provider to stream the first call", lambda: litellm_stack.script.seen.get("stall")
    )
    litellm_stack.worker.kill()
    litellm_stack.worker = await litellm_stack.stack.start_worker()
    snapshot = await litellm_stack.turn_end("AnthropicAgent", "stall")

    assert _assistant_texts(snapshot) == ["Recovered."]
    assert litellm_stack.script.seen["stall"] == 2
    history = await litellm_stack.stack.read_step_history("stall")
    run_model = [
        e for e in history if e.step_type == "RunModel" and e.event_type == EXECUTE_COMPLETED_EVENT
    ]
    assert len(run_model) == 1


async def test_a_rate_limit_is_retried_and_a_server_error_fails_the_turn(
    litellm_stack: _Stack,
) -> None:
    sessions = litellm_stack.sessions["ChatAgent"]
    await sessions.start_session("flaky", "flaky 429")
    await sessions.start_session("down", "always 500")

    flaky = await litellm_stack.turn_end("ChatAgent", "flaky")
    assert _assistant_texts(flaky) == ["Recovered."]
    assert litellm_stack.script.seen["flaky 429"] == 2

    def failed(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        state = snapshot.state
        return snapshot if state is not None and state.last_turn_error else None

    down = await wait_for_agent_snapshot(sessions, "down", failed, "the turn to fail", timeout=120)
    assert down.state is not None and "500" in (down.state.last_turn_error or "")
    assert litellm_stack.script.seen["always 500"] == 3  # RunModel's three attempts
