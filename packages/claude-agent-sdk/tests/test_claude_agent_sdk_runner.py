"""The runner with the real Claude Code CLI against a local Messages API, in one process.

The MCP-wrapper path (a schema-only tool reading its call inside a real tool Step) and parallel
reads that finish out of call order. Bad input from the model and a model that fails mid-turn are
the shared suite's, for every runner (``tests-shared/test_uniform_outcomes.py``,
``test_turn_failure.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from claude_agent_sdk import tool
from dex_agents import (
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSnapshot,
    MessageRole,
)
from dex_agents.testing import (
    InProcessWorker,
    read_step_history,
    tool_messages,
    wait_for_turn_end,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_claude_agent_sdk import ClaudeAgentSdkRunner, current_deferred_tool_execution
from dex_agents_claude_agent_sdk.testing import (
    FAKE_API_KEY_ENVIRONMENT,
    FakeAnthropicServer,
    FakeModelReply,
    FakeModelRequest,
    FakeModelResponder,
    FakeToolCall,
)
from mcp.types import ToolAnnotations

SAVE_SCHEMA = {
    "type": "object",
    "properties": {"note": {"type": "string"}},
    "required": ["note"],
    "additionalProperties": False,
}


@dataclass
class Harness:
    server: FakeAnthropicServer
    workers: InProcessWorkerFactory
    keys: list[str | None]
    #: The in-process Worker of the last ``_one_turn``.
    dex: InProcessWorker | None = None
    second_peeked: asyncio.Event = field(default_factory=asyncio.Event)

    def flow(self, respond: FakeModelResponder, **options: Any) -> AgentSessionFlow:
        @tool(
            "save_note",
            "Save a note (idempotent).",
            SAVE_SCHEMA,
            ToolAnnotations(idempotentHint=True),
        )
        async def save_note(arguments: dict[str, Any]) -> dict[str, Any]:
            call = current_deferred_tool_execution()
            self.keys.append(call.idempotency_key if call is not None else None)
            return {"content": [{"type": "text", "text": f"saved {arguments['note']}"}]}

        @tool("peek", "Read a note.", {"name": str}, ToolAnnotations(readOnlyHint=True))
        async def peek(arguments: dict[str, Any]) -> dict[str, Any]:
            self.keys.append(None if current_deferred_tool_execution() is None else "in a Step")
            name = arguments["name"]
            if name == "first":  # ends after "second": parallel reads finish out of call order
                await asyncio.wait_for(self.second_peeked.wait(), 30)
            if name == "second":
                self.second_peeked.set()
            return {"content": [{"type": "text", "text": f"note {name} is empty"}]}

        runner = ClaudeAgentSdkRunner(
            instructions="You keep notes.",
            tools=[save_note, peek],
            model="claude-test",
            upstream_base_url=self.server.route("notes", respond),
            env=FAKE_API_KEY_ENVIRONMENT,
        )
        return AgentSessionFlow(
            runner, flow_type="NotesAgent", options=AgentSessionOptions(**options)
        )


@pytest.fixture
async def harness(dex_in_process_worker: InProcessWorkerFactory) -> AsyncIterator[Harness]:
    server = FakeAnthropicServer()
    await server.start()
    try:
        yield Harness(server, dex_in_process_worker, [])
    finally:
        await server.close()


async def _one_turn(harness: Harness, flow: AgentSessionFlow, text: str) -> AgentSnapshot:
    async with harness.workers([flow]) as dex:
        harness.dex = dex
        sessions: AgentSessionClient = dex.sessions(flow)
        await sessions.start_session("s", text)
        return await wait_for_turn_end(sessions, "s")


async def test_a_schema_only_tool_reads_its_call_inside_a_real_tool_step(harness: Harness) -> None:
    def respond(request: FakeModelRequest) -> FakeModelReply:
        if request.model_call_index == 1:
            return FakeModelReply(tool_calls=[FakeToolCall("peek", {"name": "a"})])
        if request.model_call_index == 2:
            return FakeModelReply(tool_calls=[FakeToolCall("save_note", {"note": "hi"})])
        return FakeModelReply(text="; ".join(request.tool_outputs))

    snapshot = await _one_turn(harness, harness.flow(respond), "save hi")

    (save,) = [r for r in harness.server.requests[-1].messages if r["role"] == "assistant"][1:2]
    call_id = save["content"][0]["id"]
    # The read ran inside the harness (no tool Step, no key); the write in its own Step.
    assert harness.keys == [None, f"{harness.workers.session_prefix}s/turn-1/{call_id}"]
    texts = [m.text for m in snapshot.messages if m.role is MessageRole.ASSISTANT and m.text]
    assert texts == ["note a is empty; saved hi"]
    # Three model calls in all: the resumed RunModel replayed the first two answers.
    assert len(harness.server.requests) == 3
    assert snapshot.usage is not None and snapshot.usage.model_calls == 3
    assert harness.dex is not None
    history = await read_step_history(harness.dex.server_address, harness.dex.scoped("s"))
    steps = [e.step_type for e in history]
    assert "CallTool" in steps and "AwaitToolApproval" not in steps


async def test_parallel_reads_reach_the_model_in_call_order(harness: Harness) -> None:
    seen: list[list[str]] = []

    def respond(request: FakeModelRequest) -> FakeModelReply:
        if request.model_call_index == 1:
            calls = [FakeToolCall("peek", {"name": n}) for n in ("first", "second")]
            return FakeModelReply(tool_calls=calls)
        seen.append(request.tool_outputs)
        return FakeModelReply(text="; ".join(request.tool_outputs))

    snapshot = await _one_turn(harness, harness.flow(respond), "peek at both")

    # "second" finished first; the model still saw the results in call order, as stored, so a
    # transcript rebuilt from the stored messages is the request the model saw.
    in_call_order = ["note first is empty", "note second is empty"]
    assert seen == [in_call_order]
    assert [m.tool_output for m in tool_messages(snapshot)] == in_call_order
    assert harness.keys == [None, None]
