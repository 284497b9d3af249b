"""One run of the Claude Agent SDK's agent loop inside one ``RunModel`` Step.

The harness starts the real Claude Code CLI (through ``ClaudeSDKClient``) with:

- the conversation before this turn as a resumed session transcript, rebuilt from Dex's stored
  messages (never a session file a Worker kept: the next ``RunModel`` may run anywhere);
- this turn's user messages as the prompt;
- the model relay as its API, which replays the responses this turn already stored and forwards
  everything else to the real API;
- one in-process MCP server with every tool of the model call, and a ``PreToolUse`` hook that
  decides each response of the model as a whole, once all of its tool calls are known:

  * a replayed response's calls get their recorded results (from the stored tool messages, or from
    the final records of the calls the last ``RunModel`` deferred) and nothing runs again;
  * a new response whose calls are all inline reads runs them inside the CLI (at least once: a
    ``RunModel`` retry runs them again), each with its call set in ``_inline_reads``;
  * any other new response ends the run before any of its tools runs: its calls go to their own
    tool Steps.

The CLI is killed when the run ends, so nothing of it outlives the Step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    ResultMessage,
    project_key_for_directory,
)
from dex_agents import (
    AgentEventWriter,
    AgentToolCallStatus,
    ToolEffect,
    ToolExecutionError,
    tool_call_idempotency_key,
)
from dex_agents.adapters import owned_temp_directory
from dex_agents.exceptions import AgentFrameworkError

from dex_agents_claude_agent_sdk._agent_tools import (
    MCP_SERVER_NAME,
    AgentTool,
    build_mcp_server,
    error_content,
    handler_result_content,
    mcp_tool_name,
    run_function_tool,
)
from dex_agents_claude_agent_sdk._cli_process import (
    TURN_DIRECTORY_PREFIX,
    bundled_cli_path,
    kill_cli,
    launcher_environment,
    launcher_path,
)
from dex_agents_claude_agent_sdk._inline_reads import InlineReadCall, running_inline_read
from dex_agents_claude_agent_sdk._model_relay import RelayedExchange, RelayRun, model_relay
from dex_agents_claude_agent_sdk._transcript import (
    ApiMessage,
    JsonDict,
    ToolResultContent,
    tool_uses,
    transcript_entries,
)

__all__ = ["HarnessOutcome", "HarnessRequest", "HarnessSettings", "run_harness"]

QUIET_CLI_ENVIRONMENT: Final[Mapping[str, str]] = {
    # No telemetry, update checks, error reports or side model calls: only the agent's own
    # requests, and those only to the relay.
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_UPDATES": "1",
    # An inline read may take as long as the Step allows.
    "MCP_TOOL_TIMEOUT": "900000",
    "CLAUDE_CODE_SDK_MCP_TOOL_IDLE_TIMEOUT": "900000",
}
_HOOK_TIMEOUT_SECONDS: Final = 900.0


@dataclass(frozen=True)
class HarnessSettings:
    """How the CLI runs: instructions, model, the real API, and extra environment.

    Attributes:
        system_prompt: The agent's instructions (the CLI's system prompt).
        model: The model name the CLI asks for, or ``None`` for the CLI's default.
        upstream_base_url: The Messages API the relay forwards to.
        env: Extra environment for the CLI (credentials come from the Worker's environment).
        cli_path: The Claude Code CLI; ``None`` uses the one the wheel bundles.
        max_turns: The CLI's ``max_turns`` for one run, or ``None``.
    """

    system_prompt: str
    model: str | None
    upstream_base_url: str
    env: Mapping[str, str] = field(default_factory=dict)
    cli_path: str | None = None
    max_turns: int | None = None


@dataclass(frozen=True)
class HarnessRequest:
    """What one run starts from, all read from committed state.

    Attributes:
        flow_id: The session ID (for the keys of inline reads).
        turn_id: The running turn.
        history: The conversation before this turn's prompt (Messages API messages).
        prompt: This turn's user texts.
        recorded_responses: This turn's stored model responses, replayed in order.
        recorded_results: Results the model already has or Dex recorded, by ``tool_use`` ID.
        tools: The tools offered, by the name the model sees, with each one's effect.
        inline_tools: Names (as the model sees them) of the tools that run inside the CLI.
        events: The turn's event writer.
    """

    flow_id: str
    turn_id: str
    history: Sequence[ApiMessage]
    prompt: Sequence[str]
    recorded_responses: Sequence[JsonDict]
    recorded_results: Mapping[str, ToolResultContent]
    tools: Mapping[str, tuple[AgentTool, ToolEffect]]
    inline_tools: frozenset[str]
    events: AgentEventWriter


@dataclass(frozen=True)
class HarnessOutcome:
    """What a run produced.

    Attributes:
        exchanges: Every model request of the run and its response, replayed ones included.
        deferred_index: The exchange whose response's tool calls go to tool Steps, or ``None``
            when the run ended with the model's final answer (the last exchange).
        model_calls: Requests that reached the model.
        request_model: The model the CLI asked for, when the runner named one.
    """

    exchanges: Sequence[RelayedExchange]
    deferred_index: int | None
    model_calls: int
    request_model: str | None = None


async def run_harness(settings: HarnessSettings, request: HarnessRequest) -> HarnessOutcome:
    """Run the CLI's agent loop once; see the module documentation.

    Raises:
        RuntimeError: The CLI or the model failed (its error text and the model's answer).
        ValueError: A replay no longer matches the CLI's requests.
    """
    relay = await model_relay()
    run = RelayRun(
        settings.upstream_base_url,
        request.recorded_responses,
        on_text_delta=request.events.write_text_delta,
    )
    base_url = relay.open_run(run)
    workdir = owned_temp_directory(TURN_DIRECTORY_PREFIX)
    pid_file = workdir / "cli.pid"
    try:
        gate = _ToolGate(run, request)
        options = _options(settings, request, gate, base_url, workdir, pid_file)
        outcome = await _drive(options, request, run, gate, pid_file)
        return replace(outcome, request_model=settings.model)
    finally:
        kill_cli(pid_file)
        relay.close_run(base_url)
        shutil.rmtree(workdir, ignore_errors=True)


class _ToolGate:
    """The ``PreToolUse`` decisions and the MCP server's calls of one run."""

    def __init__(self, run: RelayRun, request: HarnessRequest) -> None:
        self._run = run
        self._request = request
        self.deferred_index: int | None = None
        self.deferred = asyncio.Event()

    async def pre_tool_use(self, hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        if tool_use_id is None or tool_use_id in self._request.recorded_results:
            return {}
        index, response = await self._run.response_with_tool_use(tool_use_id)
        if index < len(self._request.recorded_responses):
            return {}
        if all(str(call["name"]) in self._request.inline_tools for call in tool_uses(response)):
            return {}
        # A call of this response must run in a tool Step: none of its calls runs here, and the
        # run ends (the CLI is killed while this hook still waits).
        if self.deferred_index is None or index < self.deferred_index:
            self.deferred_index = index
        self.deferred.set()
        await asyncio.Event().wait()
        return {}

    async def call_tool(
        self, name: str, arguments: JsonDict, tool_use_id: str | None
    ) -> ToolResultContent:
        recorded = self._request.recorded_results.get(tool_use_id or "")
        if recorded is not None:
            return recorded
        offered = self._request.tools.get(mcp_tool_name(name))
        if offered is None or mcp_tool_name(name) not in self._request.inline_tools:
            return error_content(
                f"the tool call was not run: {name} cannot run inside the model step"
            )
        tool = offered[0]
        assert tool.function is not None
        events, call_id = self._request.events, tool_use_id or name
        events.write_tool_call_started(call_id, name)
        key = tool_call_idempotency_key(self._request.flow_id, self._request.turn_id, call_id)
        try:
            with running_inline_read(InlineReadCall(key, call_id, events)):
                output = await run_function_tool(tool.function, arguments)
            result = handler_result_content(name, output)
        except ToolExecutionError as error:
            result = error_content(str(error))
        except Exception as error:  # an inline read's failure is a result the model sees
            result = error_content(f"{name} failed: {type(error).__name__}: {error}")
        status = AgentToolCallStatus.FAILED if result.is_error else AgentToolCallStatus.SUCCEEDED
        events.write_tool_call_finished(call_id, name, status)
        return result


def _options(
    settings: HarnessSettings,
    request: HarnessRequest,
    gate: _ToolGate,
    base_url: str,
    workdir: Path,
    pid_file: Path,
) -> ClaudeAgentOptions:
    cwd, config_dir = workdir / "work", workdir / "config"
    cwd.mkdir()
    config_dir.mkdir()
    resume = _write_transcript(request.history, cwd, config_dir) if request.history else None
    server = build_mcp_server(request.tools, gate.call_tool)
    # Not the CLI's --bare (CLAUDE_CODE_SIMPLE=1): besides user hooks it turns off the hook
    # callbacks of the SDK, so the PreToolUse hook that defers a response's calls never runs: a
    # write's call goes to the in-process MCP server, which refuses it, instead of its tool Step.
    # It would save little anyway: most of a CLI start's CPU (about 1 s) is loading the CLI
    # itself; bare saved a few percent, within noise.
    env = {
        **QUIET_CLI_ENVIRONMENT,
        **settings.env,
        **launcher_environment(settings.cli_path or bundled_cli_path(), pid_file),
        "ANTHROPIC_BASE_URL": base_url,
        "CLAUDE_CONFIG_DIR": str(config_dir),
    }
    return ClaudeAgentOptions(
        tools=[],
        mcp_servers={MCP_SERVER_NAME: {"type": "sdk", "name": MCP_SERVER_NAME, "instance": server}},
        strict_mcp_config=True,
        allowed_tools=sorted(request.tools),
        system_prompt=settings.system_prompt,
        model=settings.model,
        max_turns=settings.max_turns,
        setting_sources=[],
        cwd=str(cwd),
        cli_path=launcher_path(),
        env=env,
        resume=resume,
        verbatim_prompts=True,
        hooks={
            "PreToolUse": [HookMatcher(hooks=[gate.pre_tool_use], timeout=_HOOK_TIMEOUT_SECONDS)]
        },
    )


def _write_transcript(history: Sequence[ApiMessage], cwd: Path, config_dir: Path) -> str:
    session_id = str(uuid.uuid4())
    project = config_dir / "projects" / project_key_for_directory(str(cwd))
    project.mkdir(parents=True)
    lines = transcript_entries(history, session_id, str(cwd))
    (project / f"{session_id}.jsonl").write_text(
        "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    )
    return session_id


async def _drive(
    options: ClaudeAgentOptions,
    request: HarnessRequest,
    run: RelayRun,
    gate: _ToolGate,
    pid_file: Path,
) -> HarnessOutcome:
    stderr: list[str] = []
    options.stderr = stderr.append
    async with ClaudeSDKClient(options) as client:
        await client.query(_prompt_messages(request.prompt))
        receiving = asyncio.create_task(_final_result(client))
        deferring = asyncio.create_task(gate.deferred.wait())
        try:
            await asyncio.wait({receiving, deferring}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            deferring.cancel()
            if not receiving.done():
                receiving.cancel()
            kill_cli(pid_file)
            with contextlib.suppress(BaseException):
                await receiving
        result = receiving.result() if not receiving.cancelled() else None
    if gate.deferred_index is not None:
        exchanges = tuple(run.exchanges[: gate.deferred_index + 1])
        return HarnessOutcome(exchanges, gate.deferred_index, run.model_calls)
    _check_result(result, run, stderr)
    return HarnessOutcome(tuple(run.exchanges), None, run.model_calls)


async def _final_result(client: ClaudeSDKClient) -> ResultMessage | None:
    async for message in client.receive_response():
        if isinstance(message, ResultMessage):
            return message
    return None


def _check_result(result: ResultMessage | None, run: RelayRun, stderr: Sequence[str]) -> None:
    final = run.exchanges[-1].response if run.exchanges else None
    if result is not None and not result.is_error and final is not None and not tool_uses(final):
        return
    detail = run.failure or (result.result if result is not None else None) or "no result"
    tail = " | ".join(line.strip() for line in stderr[-5:] if line.strip())
    reason = result.subtype if result is not None else "the CLI exited without a result"
    raise AgentFrameworkError(
        f"the Claude Agent SDK turn ended without a final answer ({reason}): {detail}"
        + (f"; CLI stderr: {tail}" if tail else "")
    )


async def _prompt_messages(texts: Sequence[str]) -> AsyncIterator[dict[str, Any]]:
    yield {
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": t} for t in texts]},
        "parent_tool_use_id": None,
    }
