"""The SDK's own MCP servers: their tools run inline in RunModel (at-least-once), unless the
server asks for approval, which defers the call to an approved tool Step like any function tool."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from agents import Agent
from agents.items import TResponseOutputItem
from agents.mcp import MCPServerStdio
from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect
from dex_agents.testing import assistant_texts, wait_for_turn_end
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_openai_agents import OpenAIAgentsRunner
from dex_agents_openai_agents.testing import (
    ModelCallInput,
    ReplyFunctionModel,
    assistant_message,
    function_call,
)
from openai_agents_test_support import wait_for_interrupt

SERVER_SCRIPT = Path(__file__).with_name("openai_agents_mcp_notes_server.py")


async def _reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
    if call.responses_since_user() == 0:
        return [
            function_call("count_words", {"text": "one two three"}, call_id="c1"),
            function_call("save_note", {"text": "remember"}, call_id="c2"),
        ]
    return [assistant_message("done: " + " | ".join(call.tool_outputs_since_user()))]


async def test_mcp_tools_run_inline_unless_the_server_asks_for_approval(
    tmp_path: Path, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    log = tmp_path / "mcp.log"
    server = MCPServerStdio(
        params={
            "command": sys.executable,
            "args": [str(SERVER_SCRIPT)],
            "env": {**os.environ, "NOTES_MCP_LOG": str(log)},
        },
        require_approval={"always": {"tool_names": ["save_note"]}},
        client_session_timeout_seconds=30,
    )
    async with server:
        agent = Agent(name="notes", model=ReplyFunctionModel(_reply), mcp_servers=[server])
        flow = AgentSessionFlow(
            OpenAIAgentsRunner(agent),
            flow_type="Notes",
            options=AgentSessionOptions(default_tool_effect=ToolEffect.UNCLASSIFIED),
        )
        async with dex_in_process_worker([flow]) as dex:
            sessions = dex.sessions(flow)
            await sessions.start_session("notes", "count and save")
            interrupt = await wait_for_interrupt(dex, flow, "notes")
            # The read ran inside RunModel; the write waits for its approval.
            assert log.read_text().splitlines() == ["count_words one two three"]
            snapshot = await sessions.get_agent_snapshot("notes")
            records = {record.tool_name: record for record in snapshot.tool_calls}
            assert records["count_words"].effect is ToolEffect.READ
            assert not records["count_words"].requires_approval
            assert records["save_note"].effect is ToolEffect.IDEMPOTENT_WRITE  # idempotentHint
            assert interrupt.tool_name == "save_note"

            assert await sessions.resolve_interrupt("notes", interrupt.interrupt_id, approved=True)
            snapshot = await wait_for_turn_end(dex.sessions(flow), "notes", 1)

    assert log.read_text().splitlines() == ["count_words one two three", "save_note remember"]
    (answer,) = assistant_texts(snapshot)
    assert answer.startswith("done: ") and "3 words" in answer and "saved" in answer
