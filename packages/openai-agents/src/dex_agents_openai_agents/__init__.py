"""Durable OpenAI Agents SDK sessions on the Dex workflow engine.

``OpenAIAgentsRunner`` runs an ``agents.Agent`` with the SDK's own ``Runner`` inside a dex-agents
session: every model call is one ``RunModel`` Step and every ``FunctionTool`` call its own tool
Step, so a crash repeats at most the one call that was running, approvals, questions, steering and
compaction work, and a handoff switches the agent inside the session. ``mcp_function_tools`` offers
the tools of a ``dex_agents.mcp.McpToolSource`` as ``FunctionTool``s, each call in its tool Step.

Example:
    >>> from agents import Agent, function_tool
    >>> @function_tool
    ... def lookup_order(order_id: str) -> str:
    ...     \"\"\"Look up an order.\"\"\"
    ...     return f"order {order_id} shipped"
    >>> agent = Agent(name="support", instructions="Help with orders.", tools=[lookup_order])
    >>> flow = openai_agents_session_flow(agent, flow_type="SupportAgent")
"""

from dex_agents_openai_agents._deferred_tool_execution import get_current_deferred_tool_execution
from dex_agents_openai_agents._errors import GuardrailTripwireError
from dex_agents_openai_agents._flow import openai_agents_session_flow
from dex_agents_openai_agents._mcp_tools import mcp_function_tool, mcp_function_tools
from dex_agents_openai_agents._runner import ContextFactory, OpenAIAgentsRunner, RunConfigFactory

__all__ = [
    "ContextFactory",
    "GuardrailTripwireError",
    "OpenAIAgentsRunner",
    "RunConfigFactory",
    "get_current_deferred_tool_execution",
    "mcp_function_tool",
    "mcp_function_tools",
    "openai_agents_session_flow",
]

__version__ = "0.3.0"
