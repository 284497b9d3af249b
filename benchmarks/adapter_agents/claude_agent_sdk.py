"""The benchmark agent under the Claude Agent SDK: the real Claude Code CLI, a local fake API.

Both sides run the same ``claude_agent_sdk.tool`` and the same scripted model behind a
``FakeAnthropicServer`` that sleeps the model latency per call, and both start and end the CLI
the same way, so the ratio shows what Dex adds and not how the CLI is shut down:

- the durable turn is one ``RunModel`` (the agent loop, the read inside it): the harness starts
  the CLI through its orphan-guard launcher and SIGKILLs it once the final answer is in;
- the in-process turn is a ``ClaudeSDKClient`` with the same CLI options (launcher, quiet
  environment, private configuration directory, no built-in tools), talking to the fake API
  directly (no relay, no tool hook, no rebuilt transcript, no engine), and SIGKILLed the same way
  once its ``ResultMessage`` arrives. (Closing the client gracefully instead waits up to 5 s for
  the CLI to exit, which would time the shutdown, not the turn.) Each agent is one session: its
  turns after the first resume the CLI's own session file (``resume=`` the last turn's session
  ID), so the in-process side carries the same growing conversation as the durable one, whose
  ``RunModel`` resumes a transcript rebuilt from Dex.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    create_sdk_mcp_server,
    tool,
)
from dex_agents import AgentSessionFlow
from dex_agents_claude_agent_sdk._cli_process import (
    bundled_cli_path,
    kill_cli,
    launcher_environment,
    launcher_path,
)
from dex_agents_claude_agent_sdk._model_step import QUIET_CLI_ENVIRONMENT
from dex_agents_claude_agent_sdk.testing import (
    FAKE_API_KEY_ENVIRONMENT,
    FakeModelReply,
    FakeModelRequest,
    FakeToolCall,
    reference_runner,
    scripted_upstream,
)
from mcp.types import ToolAnnotations

from adapter_agents import USER_TEXT, BenchmarkAgent, final_answer, lookup_order_result

INSTRUCTIONS = "You answer questions about orders."
MODEL = "claude-benchmark"


@tool(
    "lookup_order",
    "Look up an order by its ID.",
    {"order_id": str},
    ToolAnnotations(readOnlyHint=True),
)
async def lookup_order(arguments: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(lookup_order_result(arguments["order_id"]))
    return {"content": [{"type": "text", "text": text}]}


def _in_process_options(
    base_url: str, workdir: Path, stderr: list[str], resume: str | None
) -> ClaudeAgentOptions:
    """The harness's CLI options minus Dex: the framework's own MCP server, no hook, the CLI's own
    session resumed."""
    cwd, config_dir = workdir / "work", workdir / "config"
    cwd.mkdir(exist_ok=True)
    config_dir.mkdir(exist_ok=True)
    env = {
        **QUIET_CLI_ENVIRONMENT,
        **FAKE_API_KEY_ENVIRONMENT,
        **launcher_environment(bundled_cli_path(), workdir / "cli.pid"),
        "ANTHROPIC_BASE_URL": base_url,
        "CLAUDE_CONFIG_DIR": str(config_dir),
    }
    return ClaudeAgentOptions(
        tools=[],
        mcp_servers={"dex": create_sdk_mcp_server("dex", tools=[lookup_order])},
        strict_mcp_config=True,
        allowed_tools=["mcp__dex__lookup_order"],
        system_prompt=INSTRUCTIONS,
        model=MODEL,
        setting_sources=[],
        cwd=str(cwd),
        cli_path=launcher_path(),
        env=env,
        verbatim_prompts=True,
        resume=resume,
        stderr=stderr.append,  # kept for the error, as the harness keeps it
    )


async def _final_result(client: ClaudeSDKClient, stderr: list[str]) -> ResultMessage:
    async for message in client.receive_response():
        if isinstance(message, ResultMessage):
            return message
    raise RuntimeError(
        f"the Claude Agent SDK turn ended without a result; CLI stderr: {' | '.join(stderr[-5:])}"
    )


def build_benchmark_agent(model_latency_seconds: float) -> BenchmarkAgent:
    """The benchmark agent as a Claude Agent SDK agent, its model a sleeping fake API."""

    async def respond(request: FakeModelRequest) -> FakeModelReply:
        await asyncio.sleep(model_latency_seconds)
        if not request.tool_outputs:
            return FakeModelReply(tool_calls=[FakeToolCall("lookup_order", {"order_id": "7"})])
        return FakeModelReply(text=final_answer(request.tool_outputs[-1]))

    base_url = scripted_upstream("benchmark", respond)

    # The session's files (the CLI's configuration directory holds its session transcripts) live
    # as long as the agent, like the in-process history of the other runners' agents; made at the
    # first turn, so a Worker child, which builds the agent too, makes none.
    workdir: Path | None = None
    session_id: str | None = None

    async def run_in_process(text: str) -> str:
        nonlocal workdir, session_id
        if workdir is None:
            workdir = Path(tempfile.mkdtemp(prefix="claude-benchmark-"))
            atexit.register(shutil.rmtree, workdir, ignore_errors=True)
        stderr: list[str] = []
        options = _in_process_options(await base_url(), workdir, stderr, resume=session_id)
        async with ClaudeSDKClient(options) as client:
            try:
                await client.query(text or USER_TEXT)
                result = await _final_result(client, stderr)
            finally:
                kill_cli(workdir / "cli.pid")  # as the harness ends its CLI
        session_id = result.session_id
        return result.result or ""

    runner = reference_runner(
        tools=[lookup_order], instructions=INSTRUCTIONS, model=MODEL, upstream_base_url=base_url
    )
    return BenchmarkAgent(
        flow=AgentSessionFlow(runner, flow_type="AdapterTurnsClaudeAgentSdk"),
        run_in_process=run_in_process,
    )
