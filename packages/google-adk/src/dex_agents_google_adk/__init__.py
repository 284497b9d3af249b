"""Durable Google ADK agents on the Dex workflow engine: every model call and tool call a Step.

:class:`GoogleAdkRunner` runs an ADK ``LlmAgent`` with ADK's own ``Runner`` for exactly one model
call per ``RunModel`` Step and defers every tool call to its own tool Step;
:func:`google_adk_session_flow` wraps it in the session Flow. Inside a tool,
:func:`idempotency_key_for_tool_call` returns the call's stable idempotency key.

Example:
    >>> flow = google_adk_session_flow(support_agent, flow_type="SupportAgent")
"""

from dex_agents_google_adk._flow import google_adk_session_flow
from dex_agents_google_adk._mcp_tools import (
    McpSourceTool,
    McpToolSourceLike,
    McpToolSourceToolset,
)
from dex_agents_google_adk._runner import DEFAULT_USER_ID, GoogleAdkRunner, ModelResolver
from dex_agents_google_adk._tool_call_key import idempotency_key_for_tool_call
from dex_agents_google_adk._tool_tasks import AdkTaskTool, AdkTaskToolCanceller

__all__ = [
    "DEFAULT_USER_ID",
    "AdkTaskTool",
    "AdkTaskToolCanceller",
    "GoogleAdkRunner",
    "McpSourceTool",
    "McpToolSourceLike",
    "McpToolSourceToolset",
    "ModelResolver",
    "google_adk_session_flow",
    "idempotency_key_for_tool_call",
]
