"""GoogleAdkRunner: a Google ADK ``LlmAgent`` under the dex-agents session, one model call per Step.

``run_model_step`` runs exactly one model call through ADK's real ``Runner`` (``_model_step``);
``execute_deferred_tool_call`` runs each held-back tool call through ADK's tool pipeline in its own
tool Step (``_tool_step``). This module holds the runner's configuration and the agent checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeAlias

from dex_agents import (
    AgentToolCall,
    AgentTurnContext,
    AgentTurnOutcome,
    BuiltInTool,
    ConfigurationError,
    ConfigurationTypeError,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
    InteractionMode,
    ToolTaskPoller,
    build_plan_note,
    estimate_text_tokens,
)
from dex_agents.adapters import AdapterRunner, agent_type_error
from google.adk.agents import RunConfig
from google.adk.agents.llm_agent import LlmAgent
from google.adk.agents.run_config import StreamingMode  # type: ignore[attr-defined]
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from dex_agents_google_adk._model_call_plugin import BuiltInAdkTool, built_in_adk_tools
from dex_agents_google_adk._model_step import AdkModelStep, summarize_with_model
from dex_agents_google_adk._tool_activation import AdkActivation, open_activation
from dex_agents_google_adk._tool_step import run_tool_step
from dex_agents_google_adk._tool_tasks import AdkTaskTool
from dex_agents_google_adk._transcript import (
    event_messages,
    read_transcript,
    recorded_function_response,
    results_event,
    user_message,
)

__all__ = ["DEFAULT_USER_ID", "GoogleAdkRunner", "ModelResolver"]

DEFAULT_USER_ID: Final = "dex-agents"
"""The ADK ``user_id`` of every activation's session, unless the runner is given another."""

ModelResolver: TypeAlias = Callable[[Mapping[str, object]], "BaseLlm | str"]
"""Maps a turn's session settings to the ADK model of its calls (a ``BaseLlm`` or a model name)."""


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
        self._user_id = user_id
        self._model_step = AdkModelStep(
            self._app, user_id, _require_run_config(run_config), trust_mcp_tool_annotations
        )
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
        """Runs the agent through ADK's ``Runner`` for one model call (``AdkModelStep``).

        Raises:
            StoredStateError: When the run state is not this runner's.
            RunnerContractError: When ADK asked for a second model call.
            ConfigurationError: When an agent tool uses the name of an enabled built-in tool.
            AgentFrameworkError: When the model answers with an error response without content.
            Exception: Whatever ADK or the model raises.
        """
        agent = self._turn_agent(turn.session_settings)
        return await self._model_step.run(turn, agent, self._built_in_tools(turn))

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
        return await run_tool_step(await self._open_tool_activation(call.flow_id), call)

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
        return await summarize_with_model(model, request, self._summary_max_output_tokens)

    def _turn_agent(self, settings: Mapping[str, object]) -> LlmAgent:
        if self._resolve_model is None:
            return self._agent
        return self._agent.clone(update={"model": self._resolve_model(settings)})

    def _built_in_tools(self, turn: AgentTurnContext) -> tuple[BuiltInAdkTool, ...]:
        enabled = turn.enabled_built_in_tools
        if turn.interaction_mode is InteractionMode.PLANNING:
            enabled = enabled & {BuiltInTool.WRITE_TODOS.value}
        return built_in_adk_tools(enabled)

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
        raise agent_type_error(
            "GoogleAdkRunner", "a google.adk LlmAgent or an App around one", agent
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
