"""``ClaudeAgentSdkRunner``: the runner contract for the Claude Agent SDK, a whole-turn harness.

One ``RunModel`` runs the SDK's agent loop (see ``_model_step``) until the turn's final answer or the
first model response that asks for a tool that must run in its own tool Step. Everything the run
produced is stored as it appears (``ToolCallsRequested.new_messages``), so the next ``RunModel``
rebuilds the CLI's conversation from committed state only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from claude_agent_sdk import SdkMcpTool
from dex_agents import (
    BUILT_IN_TOOL_DEFINITIONS,
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
    AgentMessage,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    BuiltInTool,
    ConfigurationError,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
    InteractionMode,
    MessageRole,
    ModelCallMetadata,
    ResolvedToolPolicy,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolSource,
    build_context_summary_prompt,
    build_plan_note,
    dump_json_text,
    estimate_text_tokens,
)
from dex_agents.adapters import (
    UNKNOWN_TOOL_POLICY,
    AdapterRunner,
    ModelCallCountState,
    ToolSourceRoutes,
    agent_type_error,
    tool_arguments_object,
    unknown_tool_error,
)
from dex_agents.exceptions import AgentFrameworkError

from dex_agents_claude_agent_sdk._agent_tools import (
    AgentTool,
    handler_result_content,
    mcp_tool_name,
    run_function_tool,
)
from dex_agents_claude_agent_sdk._model_step import (
    HarnessOutcome,
    HarnessRequest,
    HarnessSettings,
    run_harness,
)
from dex_agents_claude_agent_sdk._transcript import (
    ToolResultContent,
    api_messages,
    assistant_messages,
    join_responses,
    record_result,
    response_text,
    stored_item,
    tool_result_message,
    tool_uses,
    user_text_message,
)

__all__ = ["DEFAULT_UPSTREAM_BASE_URL", "ClaudeAgentSdkRunner"]

logger = logging.getLogger(__name__)

DEFAULT_UPSTREAM_BASE_URL: Final = "https://api.anthropic.com"
"""Where the relay sends model requests when neither the runner nor the environment names one."""
_SOURCE_REFERENCE_KEY: Final = "claude_agent_sdk_tool_source"
_RUN_STATE: Final = ModelCallCountState("claude_agent_sdk_model_steps", "ClaudeAgentSdkRunner")
_LISTING_TIMEOUT_SECONDS: Final = 10.0
# What the CLI adds to every request beside the stored messages: its own system prompt, the
# environment note, and the request envelope.
_CLI_INPUT_OVERHEAD_TOKENS: Final = 700


class ClaudeAgentSdkRunner(AdapterRunner):
    """Runs a Claude Agent SDK agent as a durable session: each turn's agent loop in ``RunModel``,
    reads inside it, every other tool call in its own tool Step.

    Args:
        instructions: The agent's system prompt.
        tools: The agent's tools, made with ``claude_agent_sdk.tool``. MCP ``annotations``
            (``readOnlyHint``, ``idempotentHint``) give their effect unless a ``ToolPolicy`` says
            otherwise; a read runs inside the harness, any other effect in its own tool Step. A
            handler that runs in a tool Step may return ``ToolInputRequested`` or
            ``ToolTaskStarted`` instead of its content, and reads its call with
            ``current_deferred_tool_execution()``.
        tool_sources: Tools listed at run time (``dex_agents.ToolSource``, such as an MCP source);
            their calls always run in tool Steps, so they may ask questions or start tasks.
        model: The model the CLI asks for; ``None`` uses the CLI's default.
        resolve_model: Maps the turn's session settings to a model name (``None``: ``model``).
        upstream_base_url: The Messages API, or an async function returning it (called in each
            ``RunModel``, such as for a local test server started on first use); default
            ``ANTHROPIC_BASE_URL`` of the Worker's environment, else
            :data:`DEFAULT_UPSTREAM_BASE_URL`.
        env: Extra environment for the CLI, such as ``CLAUDE_CODE_MAX_RETRIES``.
        cli_path: The Claude Code CLI; default the one the claude-agent-sdk wheel bundles.
        max_turns: The CLI's ``max_turns`` per ``RunModel``.

    Raises:
        ConfigurationError: Two tools share a name.
        ConfigurationTypeError: A tool is not a ``claude_agent_sdk.SdkMcpTool``.

    Example:
        >>> @tool("lookup_order", "Look up an order.", {"order_id": str},
        ...       annotations=ToolAnnotations(readOnlyHint=True))
        ... async def lookup_order(args):
        ...     return {"content": [{"type": "text", "text": "order 7: shipped"}]}
        >>> runner = ClaudeAgentSdkRunner(instructions="You help with orders.", tools=[lookup_order])
    """

    supports_plan_mode = True

    def __init__(
        self,
        *,
        instructions: str,
        tools: Sequence[SdkMcpTool[Any]] = (),
        tool_sources: Sequence[ToolSource] = (),
        model: str | None = None,
        resolve_model: Callable[[Mapping[str, object]], str | None] | None = None,
        upstream_base_url: str | Callable[[], Awaitable[str]] | None = None,
        env: Mapping[str, str] | None = None,
        cli_path: str | None = None,
        max_turns: int | None = None,
    ) -> None:
        for tool in tools:
            if not isinstance(tool, SdkMcpTool):
                # The CLI is the agent; what a user gives this runner as its agent is its tools.
                raise agent_type_error(
                    "ClaudeAgentSdkRunner", "claude_agent_sdk.tool(...) definitions as tools", tool
                )
        self._functions = {tool.name: AgentTool.of_function(tool) for tool in tools}
        if len(self._functions) != len(tools):
            raise ConfigurationError("two tools of the agent share a name; give each its own")
        names = [source.source_name for source in tool_sources]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"tool source names must be unique, got {names}")
        self._sources = ToolSourceRoutes(
            {source.source_name: source for source in tool_sources},
            key=_SOURCE_REFERENCE_KEY,
            owner="ClaudeAgentSdkRunner",
        )
        self.tool_source_routes = self._sources
        self._instructions = instructions
        self._model = model
        self._resolve_model = resolve_model
        self._upstream = upstream_base_url
        self._env = dict(env or {})
        self._cli_path = cli_path
        self._max_turns = max_turns

    # -- the runner contract ------------------------------------------------------------------

    def build_user_message(self, text: str) -> FrameworkMessage:
        """User text as stored: ``{"role": "user", "content": text}``."""
        return user_text_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Run the agent loop until the final answer or a call that needs a tool Step.

        Raises:
            StoredStateError: When the run state is not this runner's.
            Exception: Whatever the CLI, the relay or the model raises.
        """
        model_steps = _RUN_STATE.decode(turn.framework_run_state)
        tools = await self._offered_tools(turn)
        offered = {
            mcp_tool_name(tool.name): (tool, self._policy(turn, tool).effect) for tool in tools
        }
        inline = frozenset(
            name
            for name, (tool, effect) in offered.items()
            if tool.function is not None and effect is ToolEffect.READ
        )
        view = _TurnView(turn)
        request = HarnessRequest(
            flow_id=turn.flow_id,
            turn_id=turn.turn_id,
            history=view.history(),
            prompt=view.prompt(turn),
            recorded_responses=view.responses,
            recorded_results=view.results(),
            tools=offered,
            inline_tools=inline,
            events=turn.events,
        )
        settings = await self._settings(turn.session_settings, self._instructions)
        outcome = await run_harness(settings, request)
        return self._outcome(turn, view, offered, outcome, model_steps)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run one deferred call: a source's tool through its source, a function tool's handler."""
        source_outcome = await self._sources.execute(call)
        if source_outcome is not None:
            return source_outcome
        name = call.tool_call.tool_name
        tool = self._functions.get(name)
        if tool is None or tool.function is None:
            raise unknown_tool_error(name)
        arguments = tool_arguments_object(name, call.tool_call.arguments)
        result = await run_function_tool(tool.function, arguments)
        if isinstance(result, DeferredToolOutcome):
            return result
        content = handler_result_content(name, result)
        if content.is_error:
            raise ToolExecutionError(content.text or f"{name} failed")
        return ToolExecutionResult(content.text)

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """Results of the turn's deferred calls, from their final records."""
        stored = {
            message.tool_call_id
            for message in turn.messages
            if message.role is MessageRole.TOOL and message.turn_id == turn.turn_id
        }
        return [
            _record_message(record.tool_call_id, record.tool_name, record_result(record))
            for record in turn.tool_calls.values()
            if record.tool_call_id not in stored and record.is_final
        ]

    # -- compaction ---------------------------------------------------------------------------

    def fixed_input_tokens(self, turn: AgentTurnContext) -> int:
        """The instructions, the function tools' definitions and the CLI's own additions."""
        fixed = estimate_text_tokens(self._instructions) + _CLI_INPUT_OVERHEAD_TOKENS
        return fixed + sum(
            estimate_text_tokens(json.dumps(tool.input_schema) + tool.description)
            for tool in self._functions.values()
        )

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """One model call through the CLI, no tools, with the shared summary prompt."""
        harness = HarnessRequest(
            flow_id=request.flow_id,
            turn_id=request.turn_id,
            history=(),
            prompt=(build_context_summary_prompt(request),),
            recorded_responses=(),
            recorded_results={},
            tools={},
            inline_tools=frozenset(),
            events=request.events,
        )
        settings = await self._settings(request.session_settings, CONTEXT_SUMMARY_INSTRUCTIONS)
        outcome = await run_harness(settings, harness)
        final = outcome.exchanges[-1].response or {}
        return ContextSummaryResult(
            text=response_text(final),
            usage=_usage(outcome),
            model_call_metadata=_metadata(settings.model, outcome),
        )

    # -- internals ----------------------------------------------------------------------------

    async def _settings(
        self, session_settings: Mapping[str, object], system_prompt: str
    ) -> HarnessSettings:
        model = self._model
        if self._resolve_model is not None:
            model = self._resolve_model(session_settings) or model
        configured = self._upstream
        if callable(configured):
            configured = await configured()
        upstream = configured or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_UPSTREAM_BASE_URL
        return HarnessSettings(
            system_prompt=system_prompt,
            model=model,
            upstream_base_url=upstream,
            env=self._env,
            cli_path=self._cli_path,
            max_turns=self._max_turns,
        )

    async def _offered_tools(self, turn: AgentTurnContext) -> list[AgentTool]:
        enabled = turn.enabled_built_in_tools
        built_ins = [
            AgentTool.of_built_in(d) for d in BUILT_IN_TOOL_DEFINITIONS if str(d.name) in enabled
        ]
        if turn.interaction_mode is InteractionMode.PLANNING:
            return [tool for tool in built_ins if tool.name == BuiltInTool.WRITE_TODOS]
        for tool in self._functions.values():
            if tool.name in enabled:
                raise ConfigurationError(
                    f"tool {tool.name} uses the name of an enabled built-in tool"
                )
        sources = self._sources.sources.values()
        listed = [tool for source in sources for tool in await _listing(source)]
        taken = set(self._functions) | set(enabled)
        for tool in listed:
            if tool.name in taken:
                raise ConfigurationError(
                    f"tool {tool.name} of a tool source repeats another tool's name"
                )
            taken.add(tool.name)
        return [*self._functions.values(), *listed, *built_ins]

    def _policy(self, turn: AgentTurnContext, tool: AgentTool) -> ResolvedToolPolicy:
        return turn.resolve_tool_policy(tool.name, tool.framework_effect)

    def _outcome(
        self,
        turn: AgentTurnContext,
        view: _TurnView,
        offered: Mapping[str, tuple[AgentTool, ToolEffect]],
        outcome: HarnessOutcome,
        model_steps: int,
    ) -> AgentTurnOutcome:
        messages = _new_messages(outcome, len(view.responses), offered)
        usage, metadata = _usage(outcome), _metadata(outcome.request_model, outcome)
        calls: list[DeferredToolCall] = []
        if outcome.deferred_index is not None:
            response = outcome.exchanges[outcome.deferred_index].response or {}
            calls = [self._deferred_call(turn, block, offered) for block in tool_uses(response)]
        return _RUN_STATE.outcome(
            model_steps + 1,
            tool_calls=calls,
            new_messages=messages,
            usage=usage,
            model_call_metadata=metadata,
        )

    def _deferred_call(
        self,
        turn: AgentTurnContext,
        block: Mapping[str, Any],
        offered: Mapping[str, tuple[AgentTool, ToolEffect]],
    ) -> DeferredToolCall:
        call_id, wire_name = str(block["id"]), str(block["name"])
        arguments = dump_json_text(block.get("input") or {})
        entry = offered.get(wire_name)
        if entry is None:
            return DeferredToolCall(call_id, _plain_name(wire_name), arguments, UNKNOWN_TOOL_POLICY)
        tool = entry[0]
        if tool.source is not None and tool.listed is not None:
            built = tool.source.deferred_tool_call(turn, call_id, arguments, tool.listed)
            return self._sources.wrap(tool.source.source_name, built)
        return DeferredToolCall(call_id, tool.name, arguments, self._policy(turn, tool))


class _TurnView:
    """The turn's committed state, split the way the harness needs it."""

    def __init__(self, turn: AgentTurnContext) -> None:
        messages = turn.messages
        first = next(
            (i for i, m in enumerate(messages) if m.turn_id == turn.turn_id), len(messages)
        )
        self._before = messages[:first]
        self._turn = [m for m in messages[first:] if m.turn_id == turn.turn_id]
        self._summary = turn.context_summary
        self._records = turn.tool_calls
        self.responses = join_responses(m for m in self._turn if m.role is MessageRole.ASSISTANT)

    def history(self) -> list[dict[str, Any]]:
        conversation = api_messages(self._before)
        if self._summary is not None:
            note = f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{self._summary.text}"
            conversation.insert(0, {"role": "user", "content": note})
        return conversation

    def prompt(self, turn: AgentTurnContext) -> list[str]:
        texts: list[str] = []
        for message in self._turn:
            if message.role is not MessageRole.USER:
                break
            texts.append(message.text or "")
        note = build_plan_note(turn.plan, turn.interaction_mode)
        return [note, *texts] if note else texts

    def results(self) -> dict[str, ToolResultContent]:
        results = {
            record.tool_call_id: record_result(record)
            for record in self._records.values()
            if record.is_final
        }
        for message in self._turn:
            if message.role is MessageRole.TOOL and message.tool_call_id:
                results[message.tool_call_id] = _stored_result(message)
        return results


def _stored_result(message: AgentMessage) -> ToolResultContent:
    block = stored_item(message.framework_item)["content"][0]
    return ToolResultContent(list(block.get("content") or []), bool(block.get("is_error")))


def _record_message(call_id: str, tool_name: str, result: ToolResultContent) -> FrameworkMessage:
    block = {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": result.content,
        "is_error": result.is_error,
    }
    return tool_result_message(block, tool_name)


def _new_messages(
    outcome: HarnessOutcome,
    replayed: int,
    offered: Mapping[str, tuple[AgentTool, ToolEffect]],
) -> list[FrameworkMessage]:
    """What the run added after the stored responses: each request's new tool results (what the
    model saw), then each new response."""
    stored: list[FrameworkMessage] = []
    exchanges = outcome.exchanges
    for index in range(replayed, len(exchanges)):
        previous = exchanges[index - 1].response if index > 0 else None
        if previous is not None:
            stored.extend(_results_in_request(exchanges[index].request, previous, offered))
        response = exchanges[index].response
        if response is not None and not exchanges[index].replayed:
            stored.extend(assistant_messages(response))
    return stored


def _results_in_request(
    request: Mapping[str, Any],
    response: Mapping[str, Any],
    offered: Mapping[str, tuple[AgentTool, ToolEffect]],
) -> list[FrameworkMessage]:
    names = {str(call["id"]): str(call["name"]) for call in tool_uses(response)}
    blocks = {
        str(block.get("tool_use_id")): block
        for message in request.get("messages") or []
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    }
    results = []
    for call_id, wire_name in names.items():
        block = blocks.get(call_id)
        if block is None:
            raise AgentFrameworkError(
                f"the CLI's next model request carries no result of tool call {call_id}; the "
                "turn cannot be stored consistently"
            )
        entry = offered.get(wire_name)
        results.append(
            tool_result_message(block, entry[0].name if entry else _plain_name(wire_name))
        )
    return results


def _usage(outcome: HarnessOutcome) -> AgentUsage:
    input_tokens = output_tokens = cached = 0
    for exchange in outcome.exchanges:
        if exchange.replayed or exchange.response is None:
            continue
        usage = exchange.response.get("usage") or {}
        cached += int(usage.get("cache_read_input_tokens") or 0)
        input_tokens += int(usage.get("input_tokens") or 0) + int(
            usage.get("cache_creation_input_tokens") or 0
        )
        output_tokens += int(usage.get("output_tokens") or 0)
    return AgentUsage(
        input_tokens=input_tokens + cached,
        output_tokens=output_tokens,
        cached_input_tokens=cached,
        model_calls=outcome.model_calls,
    )


def _metadata(request_model: str | None, outcome: HarnessOutcome) -> ModelCallMetadata:
    fresh = [e.response for e in outcome.exchanges if not e.replayed and e.response is not None]
    last = fresh[-1] if fresh else {}
    reason = last.get("stop_reason")
    return ModelCallMetadata(
        request_model=request_model,
        response_model=last.get("model"),
        provider_name="anthropic",
        response_id=last.get("id"),
        finish_reasons=(str(reason),) if reason else (),
    )


def _plain_name(wire_name: str) -> str:
    prefix = mcp_tool_name("")
    return wire_name.removeprefix(prefix)


async def _listing(source: ToolSource) -> list[AgentTool]:
    try:
        listed = await asyncio.wait_for(source.list_tools(), _LISTING_TIMEOUT_SECONDS)
    except Exception as error:  # a down source offers nothing this model call
        logger.warning("tool source %s listed no tools: %s", source.source_name, error)
        return []
    return [AgentTool.of_listed(source, tool) for tool in listed]
