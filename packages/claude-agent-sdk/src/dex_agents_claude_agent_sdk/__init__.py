"""Durable Claude Agent SDK agents on Dex (``dex-agents-claude-agent-sdk``).

:class:`ClaudeAgentSdkRunner` runs each turn's Claude Agent SDK agent loop (the bundled Claude Code
CLI) inside one ``RunModel`` Step of a ``dex_agents.AgentSessionFlow``. Read tools run inside that
loop (at least once); every other tool call is deferred to its own tool Step, where approvals,
questions, tasks and the crash rules of its effect apply. A tool that runs in a tool Step reads
its call, with the idempotency key, from :func:`current_deferred_tool_execution`.
:func:`claude_agent_sdk_session_flow` wraps a runner in the session Flow, and
:func:`mcp_sdk_tools` offers the tools of a ``dex_agents.mcp.McpToolSource`` the same way.

Example:
    >>> runner = ClaudeAgentSdkRunner(instructions="You help with orders.", tools=[lookup_order])
    >>> flow = AgentSessionFlow(runner, flow_type="OrdersAgent")
"""

from dex_agents import current_deferred_tool_execution, require_deferred_tool_execution

from dex_agents_claude_agent_sdk._flow import claude_agent_sdk_session_flow
from dex_agents_claude_agent_sdk._mcp_tools import mcp_sdk_tool, mcp_sdk_tools
from dex_agents_claude_agent_sdk._runner import DEFAULT_UPSTREAM_BASE_URL, ClaudeAgentSdkRunner

__all__ = [
    "DEFAULT_UPSTREAM_BASE_URL",
    "ClaudeAgentSdkRunner",
    "claude_agent_sdk_session_flow",
    "current_deferred_tool_execution",
    "mcp_sdk_tool",
    "mcp_sdk_tools",
    "require_deferred_tool_execution",
]
