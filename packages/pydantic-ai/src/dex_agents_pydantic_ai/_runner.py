"""PydanticAIRunner: a Pydantic AI agent as a durable agent session, one Step per call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic

from dex_agents import (
    AgentToolCall,
    AgentTurnContext,
    AgentTurnOutcome,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
    ToolTaskPoller,
)
from dex_agents.adapters import AdapterRunner
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.usage import UsageLimits

from dex_agents_pydantic_ai import _compaction
from dex_agents_pydantic_ai._model_step import StepObservation, run_model_step
from dex_agents_pydantic_ai._run_state import recorded_tool_return
from dex_agents_pydantic_ai._runner_config import DepsRequest, ModelResolver, RunnerConfig
from dex_agents_pydantic_ai._tool_step import run_tool_step
from dex_agents_pydantic_ai._transcript import decode_history, encode_messages, user_message

__all__ = ["PydanticAIRunner"]


class PydanticAIRunner(AdapterRunner, Generic[AgentDepsT]):
    """Runs a ``pydantic_ai.Agent`` in a durable agent session.

    Each ``RunModel`` Step drives the agent's graph (``agent.iter``) through exactly one
    ``ModelRequestNode``, from the stored Pydantic AI messages. Every tool call the model makes,
    reads included, and the calls of the agent's MCP toolsets, is deferred to its own tool Step,
    which runs it through the agent's own ``CallToolsNode``; the next ``RunModel`` hands the
    results back as ``DeferredToolResults``. Structured output (``output_type``) is processed by the
    agent as usual. Messages are stored as Pydantic AI's own ``ModelMessage`` JSON, one part each.

    Args:
        agent: The agent, unchanged: tools, toolsets (MCP included), instructions, system prompts,
            output type, output validators and capabilities all apply.
        resolve_model: Maps a turn's session settings to the model of its calls; without it the
            agent's own model serves every call.
        deps_factory: Builds the agent's ``deps`` in the Worker for each Step, given a
            :class:`DepsRequest` (the tool Step's ``DeferredToolExecution`` included), sync or async.
            Without it ``deps`` is ``None``.
        usage_limits: Pydantic AI's ``UsageLimits``, counted over the whole turn (the run state
            carries the turn's ``RunUsage``); Pydantic AI's default allows 50 requests.
        stream: Stream each model response into ``text_delta``/``reasoning_delta`` events when
            the model can stream; a model that cannot (``FunctionModel`` without a
            ``stream_function``) gets a plain request, as with ``False``, which writes the
            response's text once it arrived.
        tool_task_poller: Polls the remote work a tool started by returning ``ToolTaskStarted``;
            its ``cancel_tool_task``, if any, cancels it.
        summary_max_output_tokens: ``max_tokens`` of a summary call, kept free of the prompt.

    Raises:
        ConfigurationTypeError: When ``agent`` is not a ``pydantic_ai.Agent``.
        ConfigurationError: When the agent has no model and no ``resolve_model`` is given, or a
            callable argument is not callable.

    Example:
        >>> agent = Agent("openai:gpt-5-mini", instructions="You help with orders.", tools=[lookup])
        >>> flow = AgentSessionFlow(PydanticAIRunner(agent), flow_type="OrdersAgent")
    """

    supports_plan_mode = True
    """A planning turn offers only ``write_todos`` (and the output tools) and sees the plan note."""

    def __init__(
        self,
        agent: Agent[AgentDepsT, Any],
        *,
        resolve_model: ModelResolver | None = None,
        deps_factory: Callable[[DepsRequest], AgentDepsT | Awaitable[AgentDepsT]] | None = None,
        usage_limits: UsageLimits | None = None,
        stream: bool = True,
        tool_task_poller: ToolTaskPoller | None = None,
        summary_max_output_tokens: int | None = None,
    ) -> None:
        self._config = RunnerConfig(agent, resolve_model, deps_factory, usage_limits, stream)
        self._tool_task_poller = tool_task_poller
        self._summary_max_output_tokens = summary_max_output_tokens
        # The last model request's instructions and tools, for the synchronous estimate only.
        self._observation = StepObservation()

    @property
    def agent(self) -> Agent[AgentDepsT, Any]:
        """The agent this runner runs."""
        return self._config.agent

    def build_user_message(self, text: str) -> FrameworkMessage:
        """A ``ModelRequest`` with one ``UserPromptPart``."""
        return user_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Make the turn's next model call; see the class documentation.

        Raises:
            ModelOutputRetryError: When the answer fails the agent's output validation.
            Exception: Whatever Pydantic AI or the model raises.
        """
        return await run_model_step(self._config, turn, self._observation)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run one tool call through the agent's ``CallToolsNode``.

        Raises:
            ToolExecutionError: For a failure the model should see.
            Exception: Whatever else the tool raises.
        """
        return await run_tool_step(self._config, call)

    async def find_tool_task_poller(
        self, flow_id: str, tool_call: AgentToolCall
    ) -> ToolTaskPoller | None:
        """The ``tool_task_poller``, which polls the tasks of every tool."""
        return self._tool_task_poller

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """The results of the turn's stored tool calls that have none stored yet, from records."""
        turn_messages = [message for message in turn.messages if message.turn_id == turn.turn_id]
        answered: set[str] = set()
        calls: list[ToolCallPart] = []
        for message in decode_history(turn_messages):
            if isinstance(message, ModelResponse):
                calls.extend(message.tool_calls)
            elif isinstance(message, ModelRequest):
                answered.update(
                    part.tool_call_id for part in message.parts if isinstance(part, ToolReturnPart)
                )
        returns = [
            ModelRequest(
                parts=[recorded_tool_return(call, turn.recorded_tool_call(call.tool_call_id))]
            )
            for call in calls
            if call.tool_call_id not in answered
        ]
        return encode_messages(returns)

    def fixed_input_tokens(self, turn: AgentTurnContext) -> int:
        """This runner's last request's instructions and tools (the kit's estimate adds the
        stored messages)."""
        return self._observation.fixed_input_tokens

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """One summary request to the turn's model, no tools."""
        return await _compaction.summarize_context(
            self._config, request, self._summary_max_output_tokens
        )
