"""What runs inside ``RunModel``: exactly one model call of an ADK agent, through ADK's ``Runner``.

Each ``RunModel`` runs the agent with ADK's real ``Runner`` on a fresh session rebuilt from the
stored messages (ADK ``Event`` JSON, in a ``StepSessionService``), so ADK's request processors,
instructions, callbacks, plugins and model classes all run as they would without Dex. The
:class:`~dex_agents_google_adk._model_call_plugin.ModelCallPlugin` ends the invocation after the one
model response and holds every tool call back; each then runs in its own tool Step
(``_tool_step``), and the next ``RunModel`` hands the recorded results to ADK as function
responses, the way an ADK client answers long-running tools. ADK's session service serves one
activation only: Dex holds the messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Final

from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
    AgentTurnContext,
    AgentTurnOutcome,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    FrameworkMessage,
    InteractionMode,
    ResolvedToolPolicy,
    RunnerContractError,
    ToolEffect,
    build_context_summary_prompt,
    build_plan_note,
    tool_effect_from_mcp_tool_annotations,
)
from dex_agents.adapters import UNKNOWN_TOOL_POLICY, ModelCallCountState
from dex_agents.exceptions import AgentFrameworkError
from google.adk.agents import RunConfig
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.base_tool import BaseTool
from google.genai import types

from dex_agents_google_adk._mcp_tools import McpSourceTool
from dex_agents_google_adk._model_call_plugin import (
    BuiltInAdkTool,
    DeferredAdkCall,
    ModelCallPlugin,
)
from dex_agents_google_adk._model_call_report import model_call_metadata, model_call_usage
from dex_agents_google_adk._step_session_service import StepSessionService
from dex_agents_google_adk._tool_activation import plugin_errors_unwrapped
from dex_agents_google_adk._transcript import (
    USER_AUTHOR,
    Transcript,
    event_messages,
    function_call_arguments,
    read_transcript,
    recorded_function_response,
    results_event,
    user_event,
)

__all__ = ["AdkModelStep", "summarize_with_model"]

_RUN_STATE: Final = ModelCallCountState("google_adk_model_calls", "GoogleAdkRunner")


@dataclass(frozen=True)
class _ActivationInput:
    """What one ``RunModel`` hands ADK: the session history, and the message that starts it."""

    history: list[Event]
    new_message: types.Content
    stored_results: list[FrameworkMessage]


@dataclass(frozen=True)
class AdkModelStep:
    """One ``RunModel`` of an ADK agent: its app, ADK user, run config and MCP annotation trust."""

    app: App
    user_id: str
    run_config: RunConfig
    trust_mcp_tool_annotations: bool

    async def run(
        self, turn: AgentTurnContext, agent: LlmAgent, built_in_tools: tuple[BuiltInAdkTool, ...]
    ) -> AgentTurnOutcome:
        """Runs ``agent`` through ADK's ``Runner`` for one model call.

        Raises:
            StoredStateError: When the run state is not this runner's.
            RunnerContractError: When ADK asked for a second model call.
            AgentFrameworkError: When the model answers with an error response without content.
            Exception: Whatever ADK or the model raises.
        """
        model_calls = _RUN_STATE.decode(turn.framework_run_state)
        activation = _activation_input(turn, read_transcript(turn.messages))
        plugin = ModelCallPlugin(
            built_in_tools=built_in_tools,
            planning=turn.interaction_mode is InteractionMode.PLANNING,
        )
        events = await self._run_adk(turn, agent, plugin, activation)
        kept = [event for event in events if not _is_placeholder(event, plugin.deferred)]
        new_messages = [*activation.stored_results]
        for event in kept:
            new_messages.extend(event_messages(event))
        usage = model_call_usage(kept, model_calls=plugin.model_calls)
        metadata = model_call_metadata(agent.canonical_model, kept)
        deferred = [
            self._deferred_call(turn, call, plugin.deferred[call.id])
            for event in kept
            for call in event.get_function_calls()
            if call.id in plugin.deferred
        ]
        return _RUN_STATE.outcome(
            model_calls + 1,
            tool_calls=deferred,
            new_messages=new_messages,
            usage=usage,
            model_call_metadata=metadata,
        )

    async def _run_adk(
        self,
        turn: AgentTurnContext,
        agent: LlmAgent,
        plugin: ModelCallPlugin,
        activation: _ActivationInput,
    ) -> list[Event]:
        session_service = StepSessionService(
            self.app.name, self.user_id, turn.flow_id, activation.history
        )
        app = self.app.model_copy(
            update={"root_agent": agent, "plugins": [plugin, *self.app.plugins]}
        )
        runner = Runner(app=app, session_service=session_service)
        stream = _TextStream(turn)
        events: list[Event] = []
        with plugin_errors_unwrapped():
            async with aclosing(
                runner.run_async(
                    user_id=self.user_id,
                    session_id=turn.flow_id,
                    new_message=activation.new_message,
                    run_config=self.run_config,
                )
            ) as adk_events:
                async for event in adk_events:
                    if event.partial:
                        stream.write_partial(event)
                        continue
                    stream.write_final(event)
                    events.append(event)
        _raise_on_error(events)
        return events

    def _deferred_call(
        self, turn: AgentTurnContext, call: types.FunctionCall, deferred: DeferredAdkCall
    ) -> DeferredToolCall:
        name = call.name or ""
        return DeferredToolCall(
            tool_call_id=call.id or "",
            tool_name=name,
            arguments=function_call_arguments(call),
            policy=self._policy(turn, name, deferred),
        )

    def _policy(
        self, turn: AgentTurnContext, name: str, deferred: DeferredAdkCall
    ) -> ResolvedToolPolicy:
        tool = deferred.tool
        if isinstance(tool, BuiltInAdkTool):
            # The session routes built-in calls to their own Steps, read and without approval.
            return turn.resolve_tool_policy(name, ToolEffect.READ)
        if tool is None:
            # The model named a tool it was not offered: its tool Step fails at once.
            return UNKNOWN_TOOL_POLICY
        policy = turn.resolve_tool_policy(name, self._framework_effect(tool))
        if deferred.requires_confirmation and name not in turn.tool_policies:
            # ADK's require_confirmation becomes the session's approval of the call.
            return ResolvedToolPolicy(policy.effect, requires_approval=True)
        return policy

    def _framework_effect(self, tool: BaseTool) -> ToolEffect | None:
        if isinstance(tool, McpSourceTool):
            # McpToolSource already applied its server's trust in the annotations.
            return tool.framework_effect
        if not self.trust_mcp_tool_annotations:
            return None
        annotations = getattr(getattr(tool, "raw_mcp_tool", None), "annotations", None)
        if annotations is None:
            return None
        return tool_effect_from_mcp_tool_annotations(annotations)


def _activation_input(turn: AgentTurnContext, transcript: Transcript) -> _ActivationInput:
    history = list(transcript.events)
    stored_results: list[FrameworkMessage] = []
    if turn.is_resuming:
        calls = transcript.unanswered_calls
        if not calls:
            raise RunnerContractError(
                f"{turn.turn_id} resumes after tool calls, but its stored messages hold no "
                "function call without a response"
            )
        responses = [recorded_function_response(turn.recorded_tool_call(c.id or "")) for c in calls]
        results = results_event(turn.turn_id, calls, responses)
        stored_results = event_messages(results, stable=True)
        new_message = results.content
        plan_at = transcript.turn_start
    else:
        turn_message = history.pop(transcript.turn_start) if history else user_event("")
        # ADK's Runner may edit the new message in place (it saves inline data as artifacts);
        # the event's content is shared with the events the transcript keeps per process.
        new_message = turn_message.content.model_copy(deep=True) if turn_message.content else None
        plan_at = len(history)
    plan_note = build_plan_note(turn.plan, turn.interaction_mode)
    if plan_note is not None:
        history.insert(plan_at, user_event(plan_note))
    if turn.context_summary is not None:
        note = f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{turn.context_summary.text}"
        history.insert(0, user_event(note))
    assert new_message is not None
    return _ActivationInput(history, new_message, stored_results)


async def summarize_with_model(
    model: BaseLlm, request: ContextSummaryRequest, max_output_tokens: int | None
) -> ContextSummaryResult:
    """One call of ``model`` with ``CONTEXT_SUMMARY_INSTRUCTIONS`` and no tools.

    The prompt is the core's plain-text transcript (``build_context_summary_prompt``), sized to
    the request's budget with ``max_output_tokens`` reserved.

    Raises:
        AgentFrameworkError: When the model answers with an error response without content.
    """
    prompt = build_context_summary_prompt(request, reserved_tokens=max_output_tokens or 0)
    config = types.GenerateContentConfig(
        system_instruction=CONTEXT_SUMMARY_INSTRUCTIONS, max_output_tokens=max_output_tokens
    )
    llm_request = LlmRequest(
        model=model.model,
        contents=[types.Content(role="user", parts=[types.Part(text=prompt)])],
        config=config,
    )
    responses: list[LlmResponse] = []
    async with aclosing(model.generate_content_async(llm_request, stream=False)) as stream:
        async for response in stream:
            if not response.partial:
                responses.append(response)
    _raise_on_error(responses)
    text = "".join(
        part.text or "" for response in responses for part in _parts(response) if not part.thought
    )
    return ContextSummaryResult(
        text=text,
        usage=model_call_usage(responses),
        model_call_metadata=model_call_metadata(model, responses),
    )


class _TextStream:
    """Writes the model's text and thoughts to the turn's events as they arrive, or whole when the
    model did not stream."""

    def __init__(self, turn: AgentTurnContext) -> None:
        self._turn = turn
        self._streamed = False

    def write_partial(self, event: Event) -> None:
        self._streamed = self._write(event) or self._streamed

    def write_final(self, event: Event) -> None:
        if not self._streamed and event.author != USER_AUTHOR:
            self._write(event)
        self._streamed = False

    def _write(self, event: Event) -> bool:
        wrote = False
        for part in _parts(event):
            if not part.text or part.function_response is not None:
                continue
            wrote = True
            if part.thought:
                self._turn.events.write_reasoning_delta(part.text)
            else:
                self._turn.events.write_text_delta(part.text)
        return wrote


def _parts(response: LlmResponse) -> Sequence[types.Part]:
    return response.content.parts or () if response.content is not None else ()


def _is_placeholder(event: Event, deferred: Mapping[str, DeferredAdkCall]) -> bool:
    responses = event.get_function_responses()
    return bool(responses) and all(response.id in deferred for response in responses)


def _raise_on_error(responses: Sequence[LlmResponse]) -> None:
    for response in responses:
        if response.error_code and response.content is None:
            raise AgentFrameworkError(
                f"the ADK model call failed with {response.error_code}: "
                f"{response.error_message or 'no message'}"
            )
