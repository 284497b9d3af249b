"""Durable Strands Agents on the Dex workflow engine.

``StrandsRunner`` runs a ``strands.Agent`` in a dex-agents session: every model call is its own
``RunModel`` Step and every tool call its own tool Step (through the agent's tool hooks), so a
crash repeats at most the one call that was running, and approvals, questions (Strands
interrupts), tool tasks, steering, cancellation and compaction work as for every runner.
``mcp_tools`` offers the tools of a ``dex_agents.mcp.McpToolSource`` as Strands tools with the
shared idempotency key.

Example:
    >>> from strands import Agent
    >>> agent = Agent(model=model, tools=[lookup_order], system_prompt="You help with orders.")
    >>> flow = strands_session_flow(agent, "OrdersAgent")
"""

from dex_agents_strands._flow import strands_session_flow
from dex_agents_strands._mcp_tools import mcp_tool, mcp_tools
from dex_agents_strands._runner import StrandsRunner
from dex_agents_strands._runner_config import ModelResolver
from dex_agents_strands._tool_step import IDEMPOTENCY_KEY_STATE, dex_tool_result

__all__ = [
    "IDEMPOTENCY_KEY_STATE",
    "ModelResolver",
    "StrandsRunner",
    "dex_tool_result",
    "mcp_tool",
    "mcp_tools",
    "strands_session_flow",
]
