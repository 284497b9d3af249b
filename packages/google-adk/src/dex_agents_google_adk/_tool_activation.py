"""One tool call run through ADK's own tool pipeline, inside a tool Step.

The call runs the way ADK's flow runs it after a model response: the application's plugins' and the
agent's ``before_tool_callback``/``after_tool_callback``/``on_tool_error_callback``, ADK's
confirmation gate, and the tool with a real ``ToolContext`` whose ``function_call_id`` is the
stored call ID. ADK's session service serves this one activation only: the session starts empty
(Dex holds the messages), so ``tool_context.state`` starts empty too, and state the tool writes is
not kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from dex_agents import DexAgentsError
from google.adk.agents.invocation_context import InvocationContext, new_invocation_context_id
from google.adk.agents.llm_agent import LlmAgent
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.agents.run_config import RunConfig
from google.adk.events import Event
from google.adk.flows.llm_flows.functions import handle_function_call_list_async
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.plugins.plugin_manager import PluginManager
from google.adk.sessions import InMemorySessionService
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.adk.tools.tool_context import ToolContext
from google.genai import types

__all__ = ["AdkActivation", "open_activation", "plugin_errors_unwrapped"]


@contextmanager
def plugin_errors_unwrapped() -> Iterator[None]:
    """Re-raise a dex-agents error that ADK's plugin manager wrapped in a ``RuntimeError``, so a
    callback's ``ToolExecutionError`` or ``ConfigurationError`` keeps its meaning."""
    try:
        yield
    except RuntimeError as error:
        if isinstance(error.__cause__, DexAgentsError):
            raise error.__cause__ from None
        raise


@dataclass(frozen=True)
class AdkActivation:
    """An ADK invocation context for one Step, and the agent's tools in it by name."""

    context: InvocationContext
    tools: dict[str, BaseTool]

    async def run_tool_call(
        self, call: types.FunctionCall, confirmation: ToolConfirmation | None, *, approved: bool
    ) -> Event | None:
        """Run one call through ADK's tool pipeline; ``None`` when a long-running tool answered
        nothing.

        ``confirmation`` answers the tool's own ``request_confirmation``; without one, a call the
        session's approval let through counts as confirmed for a tool whose
        ``require_confirmation`` holds these arguments, so ADK's gate does not ask again.
        """
        if confirmation is None and approved and await self._requires_confirmation(call):
            confirmation = ToolConfirmation(confirmed=True)
        confirmations = {call.id: confirmation} if confirmation is not None and call.id else None
        with plugin_errors_unwrapped():
            return await handle_function_call_list_async(
                self.context, [call], self.tools, tool_confirmation_dict=confirmations
            )

    async def _requires_confirmation(self, call: types.FunctionCall) -> bool:
        tool = self.tools.get(call.name or "")
        if tool is None:
            return False
        context = ToolContext(invocation_context=self.context, function_call_id=call.id)
        return await tool.check_require_confirmation(dict(call.args or {}), context) is True


async def open_activation(
    agent: LlmAgent,
    plugins: Sequence[BasePlugin],
    *,
    app_name: str,
    user_id: str,
    session_id: str,
) -> AdkActivation:
    """An empty ADK session for one Step, and the agent's tools resolved in it."""
    session_service = InMemorySessionService()
    session = await session_service.create_session(
        app_name=app_name, user_id=user_id, session_id=session_id
    )
    context = InvocationContext(
        session_service=session_service,
        invocation_id=new_invocation_context_id(),
        agent=agent,
        session=session,
        run_config=RunConfig(),
        plugin_manager=PluginManager(plugins=list(plugins)),
    )
    tools = await agent.canonical_tools(ReadonlyContext(context))
    return AdkActivation(context, {tool.name: tool for tool in tools})
