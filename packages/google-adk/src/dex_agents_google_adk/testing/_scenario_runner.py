"""The Google ADK runner of the shared scenario suite: the scenario agent as an ADK ``LlmAgent``.

The package's entry point ``google-adk`` in the group ``dex_agents.scenario_runners`` points to
``dex_agents_google_adk.testing:SCENARIO_RUNNER``. The scripted model is a ``BaseLlm`` subclass, so every model call goes
through ADK's own flow (request processors, callbacks, streaming); the scenario tools are ADK
``FunctionTool`` functions, ``confirm`` asks through ADK's ``tool_context.request_confirmation``,
and ``report`` is a ``BaseTool`` with its own ``FunctionDeclaration`` that starts a task and polls
it. What every runner builds alike comes from ``ScenarioRunnerBase``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, Final

from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentFrameworkRunner,
    AgentSessionFlow,
    AgentSessionOptions,
    ToolPolicy,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    estimate_text_tokens,
    require_deferred_tool_execution,
)
from dex_agents.testing import ContextWindowModel
from dex_agents.testing.scenarios import (
    CONFIRM_TOOL,
    REPORT_TOOL,
    SCENARIO_MCP_TOOL_POLICIES,
    ReportTaskPoller,
    ScenarioAgentSpec,
    ScenarioModelInput,
    ScenarioQuestion,
    ScenarioReply,
    ScenarioRunnerBase,
    ScenarioTool,
    model_streams,
    run_confirm_tool,
    run_scenario_tool_call,
    scenario_mcp_tool_source,
    scripted_reply,
    start_report_task,
)
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import Field

from dex_agents_google_adk._mcp_tools import McpToolSourceToolset
from dex_agents_google_adk._runner import GoogleAdkRunner
from dex_agents_google_adk._tool_call_key import idempotency_key_for_tool_call
from dex_agents_google_adk._transcript import function_response_text
from dex_agents_google_adk.testing._reference_agent import reference_agent

__all__ = [
    "SCENARIO_RUNNER",
    "ContextWindowLlm",
    "GoogleAdkScenarioRunner",
    "ScenarioLlm",
    "ScenarioReportTool",
]

_MODEL_NAME: Final = "scenario-model"
_STREAM_CHUNK_CHARS: Final = 8

AdkTool = BaseTool | BaseToolset
"""What an ``LlmAgent`` takes in ``tools`` besides plain functions."""


class GoogleAdkScenarioRunner(ScenarioRunnerBase[AdkTool]):
    """The scenario agent as an ADK ``LlmAgent`` whose model is the scripted ``BaseLlm``."""

    name = "google-adk"

    def scenario_tool(self, spec: ScenarioAgentSpec, tool: ScenarioTool) -> AdkTool:
        async def run(gate: str, tool_context: ToolContext) -> str:
            key = idempotency_key_for_tool_call(tool_context)
            return await run_scenario_tool_call(spec, tool, gate, key)

        run.__name__ = tool.name
        run.__doc__ = tool.description
        return FunctionTool(run)

    def confirm_tool(self, spec: ScenarioAgentSpec) -> AdkTool:
        return FunctionTool(_confirm_function(spec))

    def report_tool(self, spec: ScenarioAgentSpec) -> AdkTool:
        return ScenarioReportTool(spec)

    def mcp_tools(self, spec: ScenarioAgentSpec) -> tuple[list[AdkTool], Mapping[str, ToolPolicy]]:
        """A toolset that lists the scenario MCP server when ADK resolves the agent's tools."""
        if not spec.mcp_tools:
            return [], {}
        return [McpToolSourceToolset(scenario_mcp_tool_source(spec))], SCENARIO_MCP_TOOL_POLICIES

    def build_runner(
        self, spec: ScenarioAgentSpec, tools: Sequence[AdkTool]
    ) -> AgentFrameworkRunner[Any]:
        agent = reference_agent(
            ScenarioLlm(model=_MODEL_NAME, spec=spec),
            tools,
            name="scenario",
            instruction=spec.instructions,
        )
        return GoogleAdkRunner(
            agent,
            # The turn's session settings reach the scripted model, as a real resolve_model would.
            resolve_model=lambda settings: ScenarioLlm(
                model=_MODEL_NAME, spec=spec, settings=dict(settings)
            ),
        )

    def build_context_window_flow(
        self, model: ContextWindowModel, options: AgentSessionOptions
    ) -> AgentSessionFlow:
        """The context window scenario's agent as an ADK ``LlmAgent`` whose model asks ``model``."""

        def lookup_note(topic: str) -> str:
            return ContextWindowModel.run_tool(topic)

        lookup_note.__doc__ = ContextWindowModel.tool_description  # ADK reads the description here

        agent = reference_agent(
            ContextWindowLlm(model=_MODEL_NAME, window=model),
            [lookup_note],
            name="context_window",
            instruction=ContextWindowModel.instructions,
        )
        return AgentSessionFlow(
            GoogleAdkRunner(agent), flow_type=ContextWindowModel.flow_type, options=options
        )


class ScenarioLlm(BaseLlm):
    """The scenario's scripted model behind ADK's model interface; it streams when asked."""

    spec: ScenarioAgentSpec
    settings: dict[str, object] = Field(default_factory=dict)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        turn = _turn_contents(llm_request.contents)
        call = ScenarioModelInput(
            [_text(content) for content in llm_request.contents if _is_user_text(content)],
            model_call_index=1 + sum(content.role == "model" for content in turn),
            tool_outputs=_function_response_texts(turn),
        )
        reply = await scripted_reply(self.spec, call, self.settings)
        # Under NO_STREAMING_SETTINGS a model that cannot stream: one whole response, always.
        async for response in _reply_responses(reply, stream and model_streams(self.settings)):
            yield response


async def _reply_responses(reply: ScenarioReply, stream: bool) -> AsyncGenerator[LlmResponse, None]:
    parts = [
        types.Part(function_call=types.FunctionCall(name=call.tool, args=dict(call.arguments)))
        for call in reply.tool_calls
    ]
    text = reply.text or ""
    if text:
        parts.insert(0, types.Part(text=text))
        if stream:
            for start in range(0, len(text), _STREAM_CHUNK_CHARS):
                chunk = text[start : start + _STREAM_CHUNK_CHARS]
                yield LlmResponse(
                    content=types.Content(role="model", parts=[types.Part(text=chunk)]),
                    partial=True,
                )
    yield LlmResponse(
        content=types.Content(role="model", parts=parts),
        model_version=f"{_MODEL_NAME}-1",
        finish_reason=types.FinishReason.STOP,
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=10, candidates_token_count=max(1, len(parts))
        ),
    )


def _confirm_function(spec: ScenarioAgentSpec) -> Callable[..., str]:
    def confirm(gate: str, tool_context: ToolContext) -> str:
        """Ask before shipping, then ship once."""
        del gate  # every scenario tool takes it
        confirmation = tool_context.tool_confirmation
        answers = [] if confirmation is None else ["yes" if confirmation.confirmed else "no"]
        result = run_confirm_tool(spec, answers, idempotency_key_for_tool_call(tool_context))
        if isinstance(result, ScenarioQuestion):
            # ADK's own human-in-the-loop request; the runner makes it the session's question.
            tool_context.request_confirmation(hint=result.question)
            return "waiting for confirmation"
        return result

    confirm.__name__ = CONFIRM_TOOL
    return confirm


class ScenarioReportTool(BaseTool):
    """``report``: a schema-only ADK tool that starts a job and polls it as a tool task."""

    def __init__(self, spec: ScenarioAgentSpec) -> None:
        super().__init__(name=REPORT_TOOL, description="Start a report job.")
        self._spec = spec

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema={
                "type": "object",
                "properties": {"gate": {"type": "string"}},
                "additionalProperties": False,
            },
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        # The tool reads its tool Step's call (the saved checkpoint, the key) from the context.
        execution = require_deferred_tool_execution()
        return await start_report_task(self._spec, execution, str(args.get("gate") or ""))

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return await ReportTaskPoller(self._spec).poll_tool_task(poll)


class ContextWindowLlm(BaseLlm):
    """The context window scenario's model behind ADK's model interface; it measures each input
    with the core's token estimate."""

    window: ContextWindowModel

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if llm_request.config.system_instruction == CONTEXT_SUMMARY_INSTRUCTIONS:
            prompt = _last_user_text(llm_request.contents)
            unknown = [OUTCOME_UNKNOWN_TOOL_RESULT] * prompt.count(OUTCOME_UNKNOWN_TOOL_RESULT)
            yield _text_response(self.window.summarize(unknown))
            return
        turn = _turn_contents(llm_request.contents)
        reply = self.window.respond(
            _last_user_text(llm_request.contents),
            _function_response_texts(turn),
            _measured_input_tokens(llm_request),
        )
        if reply.tool_argument is None:
            yield _text_response(reply.text or "")
            return
        call = types.FunctionCall(
            name=ContextWindowModel.tool_name, args={"topic": reply.tool_argument}
        )
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(function_call=call)])
        )


def _text_response(text: str) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def _measured_input_tokens(llm_request: LlmRequest) -> int:
    config = llm_request.config
    sections = [
        str(config.system_instruction or ""),
        *(content.model_dump_json(exclude_none=True) for content in llm_request.contents),
        *(
            tool.model_dump_json(exclude_none=True)
            for tool in config.tools or ()
            if isinstance(tool, types.Tool)
        ),
    ]
    return estimate_text_tokens("\n".join(sections))


def _is_user_text(content: types.Content) -> bool:
    return content.role == "user" and any(part.text for part in content.parts or ())


def _turn_contents(contents: Sequence[types.Content]) -> list[types.Content]:
    """The contents after the last user text: this turn's model responses and tool results."""
    last = max((i for i, content in enumerate(contents) if _is_user_text(content)), default=-1)
    return list(contents[last + 1 :])


def _last_user_text(contents: Sequence[types.Content]) -> str:
    return next((_text(content) for content in reversed(contents) if _is_user_text(content)), "")


def _text(content: types.Content) -> str:
    return "".join(part.text or "" for part in content.parts or ())


def _function_response_texts(contents: Sequence[types.Content]) -> list[str]:
    return [
        function_response_text(part.function_response.response or {})
        for content in contents
        for part in content.parts or ()
        if part.function_response is not None
    ]


SCENARIO_RUNNER = GoogleAdkScenarioRunner().scenario_runner()
"""Google ADK under the shared suite: every optional feature (MCP tools, through
``McpToolSourceToolset``, with the mcp extra), and the context window scenario."""
