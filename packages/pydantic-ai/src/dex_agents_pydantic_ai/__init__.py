"""Durable Pydantic AI agents on the Dex workflow engine.

``PydanticAIRunner`` runs a ``pydantic_ai.Agent`` in a dex-agents session: every model request is
its own ``RunModel`` Step and every tool call (reads and MCP toolset tools included) its own tool
Step, so a crash repeats at most the one call that was running, and approvals, questions,
steering, cancellation and compaction work as for every runner. ``mcp_tools`` offers the tools of a
``dex_agents.mcp.McpToolSource`` as ``Tool.from_schema`` tools with the shared idempotency key.

Example:
    >>> from pydantic_ai import Agent
    >>> agent = Agent("openai:gpt-5-mini", instructions="You help with orders.")
    >>> flow = pydantic_ai_session_flow(agent, "OrdersAgent")
"""

from dex_agents_pydantic_ai._flow import pydantic_ai_session_flow
from dex_agents_pydantic_ai._idempotency import deferred_tool_idempotency_key
from dex_agents_pydantic_ai._mcp_tools import mcp_tool, mcp_tools
from dex_agents_pydantic_ai._model_step import ModelOutputRetryError
from dex_agents_pydantic_ai._runner import PydanticAIRunner
from dex_agents_pydantic_ai._runner_config import DepsRequest, ModelResolver
from dex_agents_pydantic_ai._tool_policies import DEX_TOOL_METADATA_KEY, dex_tool_metadata
from dex_agents_pydantic_ai._tool_step import APPROVE_CHOICE, REJECT_CHOICE

__all__ = [
    "APPROVE_CHOICE",
    "DEX_TOOL_METADATA_KEY",
    "REJECT_CHOICE",
    "DepsRequest",
    "ModelOutputRetryError",
    "ModelResolver",
    "PydanticAIRunner",
    "deferred_tool_idempotency_key",
    "dex_tool_metadata",
    "mcp_tool",
    "mcp_tools",
    "pydantic_ai_session_flow",
]
