"""StrandsRunner: a Strands agent as a durable agent session, one Step per call."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
    ToolTaskPoller,
    build_context_summary_prompt,
    estimate_text_tokens,
)
from dex_agents.adapters import AdapterRunner, check_tool_task_pollers
from strands import Agent

from dex_agents_strands._model_step import call_model, run_model_step, tool_specs
from dex_agents_strands._runner_config import ModelResolver, RunnerConfig
from dex_agents_strands._tool_step import run_tool_step
from dex_agents_strands._transcript import message_text, pending_tool_results, user_message

__all__ = ["StrandsRunner"]


class StrandsRunner(AdapterRunner):
    """Runs a ``strands.Agent`` in a durable agent session.

    Each ``RunModel`` Step makes one call of the agent's model (its system prompt, tool specs and
    the stored Strands messages, streamed as Strands' own event loop streams it); every
    ``toolUse`` of the answer runs in its own tool Step through the agent's tool registry and its
    ``BeforeToolCallEvent``/``AfterToolCallEvent`` hooks. Interrupts raised by those hooks or by a
    tool's ``tool_context.interrupt`` become session questions, and the answer is the interrupt's
    response (see ``_tool_step``). Messages are stored as Strands' own message JSON.

    The agent's own loop (``agent(...)``, its conversation manager and session manager) never runs:
    the session stores the conversation, compacts it by its own policy, and runs each call once.
    Effects come from ``AgentSessionOptions.tool_policies`` (tool name to ``ToolPolicy``), else the
    session's default effect.

    Args:
        agent: The agent: its model, tools (``@tool`` functions, ``PythonAgentTool``s, MCP tools of
            ``mcp_tools``), system prompt and hooks apply.
        resolve_model: Maps a turn's session settings to the Strands ``Model`` of its calls; without
            it the agent's own model serves every call.
        tool_task_pollers: Polls the remote work a tool started by returning
            ``dex_tool_result(ToolTaskStarted(...))``, by tool name.

    Raises:
        ConfigurationTypeError: When ``agent`` is not a ``strands.Agent`` or a poller cannot poll.
        ConfigurationError: When ``resolve_model`` is not callable or a poller names a tool the
            agent does not have.

    Example:
        >>> agent = Agent(model=OpenAIModel(...), tools=[lookup_order], system_prompt="...")
        >>> flow = AgentSessionFlow(StrandsRunner(agent), flow_type="OrdersAgent")
    """

    supports_plan_mode = True
    """A planning turn offers only ``write_todos`` and sees the plan note."""

    def __init__(
        self,
        agent: Agent,
        *,
        resolve_model: ModelResolver | None = None,
        tool_task_pollers: Mapping[str, ToolTaskPoller] | None = None,
    ) -> None:
        self._config = RunnerConfig(agent, resolve_model)
        self.tool_task_pollers = check_tool_task_pollers(
            tool_task_pollers, agent.tool_registry.registry.keys()
        )

    @property
    def agent(self) -> Agent:
        """The agent this runner runs."""
        return self._config.agent

    def build_user_message(self, text: str) -> FrameworkMessage:
        """A Strands user message with one text block."""
        return user_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Make the turn's next model call; see the class documentation.

        Raises:
            StoredStateError: When a stored message is not a Strands message.
            Exception: Whatever the model raises.
        """
        return await run_model_step(self._config, turn)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run one tool call with the agent's tool hooks.

        Raises:
            ToolExecutionError: For a failure the model should see.
            Exception: Whatever else the tool raises.
        """
        return await run_tool_step(self._config.agent, call)

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """The results of the turn's stored tool calls that have none stored yet, from records."""
        return pending_tool_results(turn)

    def fixed_input_tokens(self, turn: AgentTurnContext) -> int:
        """The system prompt and the offered tool specs."""
        specs = json.dumps(tool_specs(self._config, turn), ensure_ascii=False)
        system_prompt = self._config.agent.system_prompt or ""
        return estimate_text_tokens(system_prompt) + estimate_text_tokens(specs)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """One call of the turn's model with the core's summary prompt, no tools.

        Raises:
            Exception: Whatever the model raises.
        """
        prompt = build_context_summary_prompt(request)
        response = await call_model(
            self._config.model_for(request.session_settings),
            CONTEXT_SUMMARY_INSTRUCTIONS,
            [{"role": "user", "content": [{"text": prompt}]}],
            [],
        )
        usage = response.usage
        return ContextSummaryResult(
            text=message_text(response.message),
            usage=AgentUsage(
                input_tokens=int(usage.get("inputTokens", 0)),
                output_tokens=int(usage.get("outputTokens", 0)),
            ),
        )
