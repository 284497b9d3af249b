"""``strands_session_flow``: the session Flow of a Strands agent."""

from __future__ import annotations

from typing import Any

from dex_agents import AgentSessionFlow, AgentSessionOptions
from strands import Agent

from dex_agents_strands._runner import StrandsRunner

__all__ = ["strands_session_flow"]


def strands_session_flow(
    agent: Agent,
    flow_type: str,
    options: AgentSessionOptions | None = None,
    **runner_options: Any,
) -> AgentSessionFlow:
    """The session Flow of ``agent``: a :class:`StrandsRunner` with ``runner_options``.

    Raises:
        ConfigurationError: From :class:`StrandsRunner`, or from ``AgentSessionFlow`` for a blank
            ``flow_type``.
        ConfigurationTypeError: From ``AgentSessionFlow`` when ``options`` need a capability the
            runner lacks (compaction, plan mode).

    Example:
        >>> flow = strands_session_flow(agent, "OrdersAgent",
        ...     AgentSessionOptions(tool_policies={"refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)}))
    """
    runner = StrandsRunner(agent, **runner_options)
    return AgentSessionFlow(runner, flow_type=flow_type, options=options)
