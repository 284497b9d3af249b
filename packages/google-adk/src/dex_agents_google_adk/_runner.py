"""GoogleAdkRunner: a Google ADK ``LlmAgent`` under the dex-agents session, one model call per Step.

Each ``RunModel`` runs the agent with ADK's real ``Runner`` on a fresh ``InMemorySessionService``
session rebuilt from the stored messages (ADK ``Event`` JSON), so ADK's request processors,
instructions, callbacks, plugins and model classes all run as they would without Dex. The
:class:`~dex_agents_google_adk._model_call_plugin.ModelCallPlugin` ends the invocation after the one
model response and holds every tool call back; each then runs in its own tool Step through ADK's
tool pipeline, and the next ``RunModel`` hands the recorded results to ADK as function responses,
the way an ADK client answers long-running tools. ADK's session service serves one activation only:
Dex holds the messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
    AgentToolCall,
    AgentTurnContext,
    AgentTurnOutcome,
    BuiltInTool,
    ConfigurationError,
    ConfigurationTypeError,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
    InteractionMode,
    ResolvedToolPolicy,
    RunnerContractError,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPoller,
    ToolTaskStarted,
    TurnCompleted,
    build_context_summary_prompt,
    build_plan_note,
    dump_json_text,
    estimate_text_tokens,
    tool_effect_from_mcp_tool_annotations,
)
from dex_agents.adapters import (
    UNKNOWN_TOOL_POLICY,
    AdapterRunner,
    check_tool_arguments,
    tool_arguments_object,
    unknown_tool_error,
)
from dex_agents.exceptions import AgentFrameworkError
from google.adk.agents import RunConfig
from google.adk.agents.llm_agent import LlmAgent
from google.adk.agents.run_config import StreamingMode  # type: ignore[attr-defined]
from google.adk.apps import App
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from dex_agents_google_adk._adk_transcript import (
    USER_AUTHOR,
    Transcript,
    event_messages,
    function_call_arguments,
    function_response_output,
    read_transcript,
    recorded_function_response,
    results_event,
    user_event,
    user_message,
)
from dex_agents_google_adk._mcp_tool_source_toolset import McpSourceTool
from dex_agents_google_adk._model_call_plugin import (
    BuiltInAdkTool,
    DeferredAdkCall,
    ModelCallPlugin,
    built_in_adk_tools,
)
from dex_agents_google_adk._model_call_report import model_call_metadata, model_call_usage
from dex_agents_google_adk._tool_activation import (
    AdkActivation,
    open_activation,
    plugin_errors_unwrapped,
)
from dex_agents_google_adk._tool_tasks import AdkTaskTool

__all__ = ["DEFAULT_USER_ID", "GoogleAdkRunner", "ModelResolver"]

DEFAULT_USER_ID: Final = "dex-agents"
"""The ADK ``user_id`` of every activation's session, unless the runner is given another."""

ModelResolver: TypeAlias = Callable[[Mapping[str, object]], "BaseLlm | str"]
"""Maps a turn's session settings to the ADK model of its calls (a ``BaseLlm`` or a model name)."""

_RUN_STATE_KEY: Final = "google_adk_model_calls"
_CONFIRMED_ANSWER: Final = "yes"
_CONFIRMATION_CHOICES: Final = ("yes", "no")


@dataclass(frozen=True)
class _ActivationInput:
    """What one ``RunModel`` hands ADK: the session history, and the message that starts it."""

    history: list[Event]
    new_message: types.Content
    stored_results: list[FrameworkMessage]


class GoogleAdkRunner(AdapterRunner):
    """Runs a Google ADK ``LlmAgent`` (or an ``App`` around one) as a durable agent session.

    Every ``run_model_step`` makes exactly one model call through ADK's ``Runner``; every tool call
    the model makes, ADK tools, toolset (MCP) tools and the session's built-in tools alike, runs in
    its own tool Step through ADK's tool pipeline. Messages are stored as ADK ``Event`` JSON as soon
    as they appear, so the framework run state holds only the turn's model call count.

    Args:
        agent: The ``LlmAgent``, or an ``App`` whose root agent is one (its plugins run too).
        resolve_model: Maps a turn's session settings to the model of its calls; without it, the
            agent's own model serves every turn.
        run_config: ADK's run config; the default streams (``StreamingMode.SSE``), so text reaches
            the session's events as it arrives.
        app_name: ADK's app name; the ``App``'s name, else the agent's name.
        user_id: ADK's user ID of every activation's session.
        trust_mcp_tool_annotations: Whether an MCP tool's ``readOnlyHint``/``idempotentHint``
            classifies it (a ``ToolPolicy`` still wins).
        summary_max_output_tokens: The summary call's output limit, reserved in its request.

    Raises:
        ConfigurationTypeError: When ``agent`` is not an ``LlmAgent`` or an ``App`` of one.
        ConfigurationError: When ``user_id`` is blank or ``summary_max_output_tokens`` is not a
            positive int, or when the agent cannot run one model call per Step: it has
            ``sub_agents`` (a transfer runs the other agent inside the model loop), a code
            executor other than ADK's built-in one, a ``mode`` other than chat, or the ``App``
            has ADK's own events compaction or resumability; or when ``run_config`` streams
            bidirectionally.

    Example:
        >>> runner = GoogleAdkRunner(LlmAgent(name="support", model="gemini-2.5-flash",
        ...                                   tools=[lookup_order]))
        >>> flow = AgentSessionFlow(runner, flow_type="SupportAgent")
    """

    supports_plan_mode = True
    """A planning turn offers only ``write_todos`` and shows the model the plan note."""

    def __init__(
        self,
        agent: LlmAgent | App,
        *,
        resolve_model: ModelResolver | None = None,
        run_config: RunConfig | None = None,
        app_name: str | None = None,
        user_id: str = DEFAULT_USER_ID,
        trust_mcp_tool_annotations: bool = True,
        summary_max_output_tokens: int | None = None,
    ) -> None:
        self._app, self._agent = _require_app(agent, app_name)
        if not isinstance(user_id, str) or not user_id.strip():
            raise ConfigurationError(f"user_id must be a non-blank string, got {user_id!r}")
        if summary_max_output_tokens is not None and (
            isinstance(summary_max_output_tokens, bool)
            or not isinstance(summary_max_output_tokens, int)
            or summary_max_output_tokens < 1
        ):
            raise ConfigurationError(
                "summary_max_output_tokens must be a positive int or None, got "
                f"{summary_max_output_tokens!r}"
            )
        self._resolve_model = resolve_model
        self._run_config = _require_run_config(run_config)
        self._user_id = user_id
        self._trust_mcp_tool_annotations = trust_mcp_tool_annotations
        self._summary_max_output_tokens = summary_max_output_tokens
        self._static_input_tokens: int | None = None

    @property
    def agent(self) -> LlmAgent:
        """The ADK agent this runner runs."""
        return self._agent

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Stores user text as ADK's user ``Event`` JSON."""
        return user_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Runs the agent through ADK's ``Runner`` for one model call.

        Raises:
            RunnerContractError: When the run state is not this runner's, or ADK asked for a
                second model call.
            ConfigurationError: When an agent tool uses the name of an enabled built-in tool.
            Exception: Whatever ADK or the model raises; an error response without content
                raises ``RuntimeError`` naming ADK's error code, so the model call is retried.
        """
        model_calls = _read_run_state(turn.framework_run_state)
        activation = self._activation_input(turn, read_transcript(turn.messages))
        agent = self._turn_agent(turn.session_settings)
        plugin = ModelCallPlugin(
            built_in_tools=self._built_in_tools(turn),
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
        if deferred:
            return ToolCallsRequested(
                framework_run_state=dump_json_text({_RUN_STATE_KEY: model_calls + 1}),
                tool_calls=deferred,
                usage=usage,
                new_messages=new_messages,
                model_call_metadata=metadata,
            )
        return TurnCompleted(new_messages=new_messages, usage=usage, model_call_metadata=metadata)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Runs one tool call through ADK's tool pipeline with a real ``ToolContext``.

        Returns ADK's function response as the output text; a tool that asked for ADK's
        confirmation (``tool_context.request_confirmation``) returns ``ToolInputRequested``, and
        a tool may return ``ToolInputRequested`` or ``ToolTaskStarted`` itself.

        Raises:
            ToolExecutionError: When ADK answers with an error (unknown tool, missing arguments, a
                tool's own ``{"error": ...}``), the arguments are not a JSON object, the tool asks
                for end-user credentials, or the tool raises it.
            Exception: Whatever else the tool raises, handled by the call's effect.
        """
        record = call.tool_call
        activation = await self._open_tool_activation(call.flow_id)
        tool = activation.tools.get(record.tool_name)
        if tool is None:
            raise unknown_tool_error(record.tool_name)
        arguments = tool_arguments_object(record.tool_name, record.arguments)
        # ADK hands the arguments to the function unchecked; check them as every runner does.
        declaration = tool._get_declaration()
        if declaration is not None:
            check_tool_arguments(record.tool_name, arguments, declaration.parameters_json_schema)
        function_call = types.FunctionCall(
            id=record.tool_call_id, name=record.tool_name, args=arguments
        )
        event = await activation.run_tool_call(
            function_call, _answered_confirmation(call), approved=record.requires_approval
        )
        return _tool_outcome(record, event, call.supports_tool_tasks)

    async def find_tool_task_poller(
        self, flow_id: str, tool_call: AgentToolCall
    ) -> ToolTaskPoller | None:
        """The tool that started the call's task, when it has a ``poll_tool_task`` method."""
        activation = await self._open_tool_activation(flow_id)
        tool = activation.tools.get(tool_call.tool_name)
        return tool if isinstance(tool, AdkTaskTool) else None

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """The results of the turn's stored calls that have none yet, from their final records."""
        calls = read_transcript(turn.messages).unanswered_calls
        if not calls:
            return []
        responses = [recorded_function_response(turn.recorded_tool_call(c.id or "")) for c in calls]
        return event_messages(results_event(turn.turn_id, calls, responses), stable=True)

    def fixed_input_tokens(self, turn: AgentTurnContext) -> int:
        """The instructions, the tool declarations and the plan note this runner adds
        (instruction functions and toolsets are not counted: reserve them with
        ``CompactionPolicy.reserved_input_tokens``)."""
        plan_note = build_plan_note(turn.plan, turn.interaction_mode) or ""
        built_ins = [tool._get_declaration() for tool in self._built_in_tools(turn)]
        return (
            self._static_tokens()
            + estimate_text_tokens(plan_note)
            + sum(_declaration_tokens(declaration) for declaration in built_ins)
        )

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """One call of the turn's ADK model with ``CONTEXT_SUMMARY_INSTRUCTIONS`` and no tools.

        The prompt is the core's plain-text transcript (``build_context_summary_prompt``), sized to
        the request's budget with ``summary_max_output_tokens`` reserved.
        """
        model = self._turn_agent(request.session_settings).canonical_model
        reserved = self._summary_max_output_tokens or 0
        prompt = build_context_summary_prompt(request, reserved_tokens=reserved)
        config = types.GenerateContentConfig(
            system_instruction=CONTEXT_SUMMARY_INSTRUCTIONS,
            max_output_tokens=self._summary_max_output_tokens,
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
            part.text or ""
            for response in responses
            for part in _parts(response)
            if not part.thought
        )
        return ContextSummaryResult(
            text=text,
            usage=model_call_usage(responses),
            model_call_metadata=model_call_metadata(model, responses),
        )

    async def _run_adk(
        self,
        turn: AgentTurnContext,
        agent: LlmAgent,
        plugin: ModelCallPlugin,
        activation: _ActivationInput,
    ) -> list[Event]:
        session_service = InMemorySessionService()
        session = await session_service.create_session(
            app_name=self._app.name, user_id=self._user_id, session_id=turn.flow_id
        )
        for event in activation.history:
            await session_service.append_event(session, event)
        app = self._app.model_copy(
            update={"root_agent": agent, "plugins": [plugin, *self._app.plugins]}
        )
        runner = Runner(app=app, session_service=session_service)
        stream = _TextStream(turn)
        events: list[Event] = []
        with plugin_errors_unwrapped():
            async with aclosing(
                runner.run_async(
                    user_id=self._user_id,
                    session_id=turn.flow_id,
                    new_message=activation.new_message,
                    run_config=self._run_config,
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

    def _activation_input(self, turn: AgentTurnContext, transcript: Transcript) -> _ActivationInput:
        history = list(transcript.events)
        stored_results: list[FrameworkMessage] = []
        if turn.is_resuming:
            calls = transcript.unanswered_calls
            if not calls:
                raise RunnerContractError(
                    f"{turn.turn_id} resumes after tool calls, but its stored messages hold no "
                    "function call without a response"
                )
            responses = [
                recorded_function_response(turn.recorded_tool_call(c.id or "")) for c in calls
            ]
            results = results_event(turn.turn_id, calls, responses)
            stored_results = event_messages(results, stable=True)
            new_message = results.content
            plan_at = transcript.turn_start
        else:
            turn_message = history.pop(transcript.turn_start) if history else user_event("")
            new_message = turn_message.content
            plan_at = len(history)
        plan_note = build_plan_note(turn.plan, turn.interaction_mode)
        if plan_note is not None:
            history.insert(plan_at, user_event(plan_note))
        if turn.context_summary is not None:
            note = f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{turn.context_summary.text}"
            history.insert(0, user_event(note))
        assert new_message is not None
        return _ActivationInput(history, new_message, stored_results)

    def _turn_agent(self, settings: Mapping[str, object]) -> LlmAgent:
        if self._resolve_model is None:
            return self._agent
        return self._agent.clone(update={"model": self._resolve_model(settings)})

    def _built_in_tools(self, turn: AgentTurnContext) -> tuple[BuiltInAdkTool, ...]:
        enabled = turn.enabled_built_in_tools
        if turn.interaction_mode is InteractionMode.PLANNING:
            enabled = enabled & {BuiltInTool.WRITE_TODOS.value}
        return built_in_adk_tools(enabled)

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
        if not self._trust_mcp_tool_annotations:
            return None
        annotations = getattr(getattr(tool, "raw_mcp_tool", None), "annotations", None)
        if annotations is None:
            return None
        return tool_effect_from_mcp_tool_annotations(annotations)

    async def _open_tool_activation(self, flow_id: str) -> AdkActivation:
        return await open_activation(
            self._agent,
            self._app.plugins,
            app_name=self._app.name,
            user_id=self._user_id,
            session_id=flow_id,
        )

    def _static_tokens(self) -> int:
        if self._static_input_tokens is None:
            agent = self._agent
            texts = [
                value
                for value in (agent.instruction, agent.global_instruction)
                if isinstance(value, str)
            ]
            self._static_input_tokens = estimate_text_tokens("\n".join(texts)) + sum(
                _declaration_tokens(declaration) for declaration in _static_declarations(agent)
            )
        return self._static_input_tokens


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


def _read_run_state(run_state: str | None) -> int:
    if run_state is None:
        return 0
    try:
        decoded = json.loads(run_state)
    except ValueError:
        decoded = None
    count = decoded.get(_RUN_STATE_KEY) if isinstance(decoded, dict) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise RunnerContractError(
            f"framework run state {run_state[:80]!r} is not a GoogleAdkRunner run state"
        )
    return count


def _answered_confirmation(call: DeferredToolExecution) -> ToolConfirmation | None:
    """The ADK confirmation a rerun of the call carries: the user's last answer to the question
    the tool asked with ``request_confirmation``, with the hint and payload it asked with."""
    if not call.input_answers:
        return None
    answer = call.input_answers[-1].answer
    requested = _requested_confirmation(call.tool_call.input_continuation)
    return ToolConfirmation(
        hint=requested.hint, payload=requested.payload, confirmed=answer == _CONFIRMED_ANSWER
    )


def _requested_confirmation(continuation: str | None) -> ToolConfirmation:
    if not continuation:
        return ToolConfirmation()
    try:
        return ToolConfirmation.model_validate_json(continuation)
    except ValueError:
        return ToolConfirmation()


def _tool_outcome(
    record: AgentToolCall, event: Event | None, supports_tool_tasks: bool
) -> DeferredToolOutcome:
    name = record.tool_name
    if event is None:
        raise ToolExecutionError(
            f"tool {name} returned nothing; a long-running ADK tool must return its result, or "
            "a ToolTaskStarted that its poll_tool_task polls"
        )
    if event.actions.requested_auth_configs:
        raise ToolExecutionError(
            f"tool {name} asked for end-user credentials, which this session cannot provide"
        )
    requested = event.actions.requested_tool_confirmations.get(record.tool_call_id)
    if requested is not None:
        return ToolInputRequested(
            requested.hint or f"Run {name} with {record.arguments}?",
            choices=_CONFIRMATION_CHOICES,
            allows_free_text=False,
            continuation=requested.model_dump_json(exclude_none=True),
        )
    response = _function_response(event, record.tool_call_id)
    result = response.get("result")
    if len(response) == 1 and isinstance(result, ToolTaskStarted):
        if not supports_tool_tasks:
            raise RunnerContractError(f"tool {name} started a task, but the session cannot poll it")
        return result
    if len(response) == 1 and isinstance(result, ToolInputRequested | ToolExecutionResult):
        return result
    error = response.get("error")
    if len(response) == 1 and isinstance(error, str):
        raise ToolExecutionError(error)
    return ToolExecutionResult(function_response_output(response))


def _function_response(event: Event, call_id: str) -> dict[str, Any]:
    for response in event.get_function_responses():
        if response.id == call_id:
            return dict(response.response or {})
    raise RunnerContractError(f"ADK answered tool call {call_id} with no function response")


def _declaration_tokens(declaration: types.FunctionDeclaration | None) -> int:
    if declaration is None:
        return 0
    return estimate_text_tokens(declaration.model_dump_json(exclude_none=True))


def _static_declarations(agent: LlmAgent) -> list[types.FunctionDeclaration | None]:
    declarations: list[types.FunctionDeclaration | None] = []
    for tool in agent.tools:
        adk_tool = FunctionTool(tool) if callable(tool) and not isinstance(tool, BaseTool) else tool
        if isinstance(adk_tool, BaseTool):
            try:
                declarations.append(adk_tool._get_declaration())
            except Exception:  # an estimate never fails a Step
                declarations.append(None)
    return declarations


def _require_app(agent: object, app_name: str | None) -> tuple[App, LlmAgent]:
    if isinstance(agent, App):
        app = agent if app_name is None else agent.model_copy(update={"name": app_name})
        root = app.root_agent
    elif isinstance(agent, LlmAgent):
        app = App(name=app_name or agent.name, root_agent=agent)
        root = agent
    else:
        raise ConfigurationTypeError(
            f"GoogleAdkRunner needs a google.adk LlmAgent or an App around one, got "
            f"{type(agent).__name__}"
        )
    if not isinstance(root, LlmAgent):
        raise ConfigurationTypeError(
            f"GoogleAdkRunner runs an LlmAgent; the App's root agent is {type(root).__name__}"
        )
    _require_single_call_agent(root)
    if app.events_compaction_config is not None:
        raise ConfigurationError(
            "the App sets events_compaction_config, ADK's own compaction, which summarizes with "
            "an extra model call; use AgentSessionOptions.compaction instead"
        )
    if app.resumability_config is not None and app.resumability_config.is_resumable:
        raise ConfigurationError(
            "the App is resumable; Dex keeps the session durable, so leave resumability_config "
            "unset"
        )
    return app, root


def _require_single_call_agent(agent: LlmAgent) -> None:
    if agent.sub_agents:
        raise ConfigurationError(
            f"agent {agent.name} has sub_agents; a transfer runs the other agent inside the model "
            "loop, which a RunModel Step cannot defer. Offer the sub-agent as an AgentTool: it "
            "then runs inside one tool Step"
        )
    executor = agent.code_executor
    if executor is not None and type(executor).__name__ != "BuiltInCodeExecutor":
        raise ConfigurationError(
            f"agent {agent.name} has a {type(executor).__name__}, which runs code after the "
            "model response and calls the model again in the same Step; only "
            "BuiltInCodeExecutor (run by the model provider) is supported"
        )
    if agent.mode not in (None, "chat"):
        raise ConfigurationError(
            f"agent {agent.name} has mode={agent.mode!r}; a session runs the root agent in chat mode"
        )


def _require_run_config(run_config: RunConfig | None) -> RunConfig:
    if run_config is None:
        return RunConfig(streaming_mode=StreamingMode.SSE)
    if not isinstance(run_config, RunConfig):
        raise ConfigurationTypeError(
            f"run_config must be a google.adk RunConfig, got {type(run_config).__name__}"
        )
    if run_config.streaming_mode not in (StreamingMode.NONE, StreamingMode.SSE):
        raise ConfigurationError(
            f"run_config.streaming_mode {run_config.streaming_mode} is not supported; use "
            "StreamingMode.SSE or StreamingMode.NONE"
        )
    if run_config.support_cfc:
        raise ConfigurationError("run_config.support_cfc runs tools over the live API; unsupported")
    return run_config
