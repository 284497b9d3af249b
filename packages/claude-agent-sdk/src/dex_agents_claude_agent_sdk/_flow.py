"""``claude_agent_sdk_session_flow``: the session Flow of a Claude Agent SDK agent."""

from __future__ import annotations

from typing import Any

from dex_agents import AgentSessionFlow, AgentSessionOptions

from dex_agents_claude_agent_sdk._runner import ClaudeAgentSdkRunner

__all__ = ["claude_agent_sdk_session_flow"]


def claude_agent_sdk_session_flow(
    *,
    flow_type: str,
    options: AgentSessionOptions | None = None,
    **runner_options: Any,
) -> AgentSessionFlow:
    """The durable session Flow of a Claude Agent SDK agent: a :class:`ClaudeAgentSdkRunner` (its
    keyword arguments are the runner's) with ``options``.

    Raises:
        ConfigurationError: From :class:`ClaudeAgentSdkRunner` (two tools share a name), or from
            ``AgentSessionFlow`` for a blank ``flow_type``.
        ConfigurationTypeError: From :class:`ClaudeAgentSdkRunner` (a tool that is not a
            ``claude_agent_sdk.SdkMcpTool``), or from ``AgentSessionFlow`` when ``options`` need
            a capability the runner lacks (compaction, plan mode).

    Example:
        >>> flow = claude_agent_sdk_session_flow(
        ...     flow_type="OrdersAgent", instructions="You help with orders.", tools=[lookup_order]
        ... )
    """
    runner = ClaudeAgentSdkRunner(**runner_options)
    return AgentSessionFlow(runner, flow_type=flow_type, options=options)
