"""``openai_agents_session_flow``: the session Flow of an OpenAI Agents SDK agent."""

from __future__ import annotations

from typing import Any

from agents import Agent
from dex_agents import AgentSessionFlow, AgentSessionOptions

from dex_agents_openai_agents._runner import OpenAIAgentsRunner

__all__ = ["openai_agents_session_flow"]


def openai_agents_session_flow(
    agent: Agent[Any] | OpenAIAgentsRunner,
    *,
    flow_type: str,
    options: AgentSessionOptions | None = None,
) -> AgentSessionFlow:
    """The durable session Flow of ``agent``: an ``OpenAIAgentsRunner`` with default settings, or
    the runner you configured.

    ``options`` carries the tool policies: the SDK has no side-effect classes, so give each tool
    its ``ToolPolicy`` there (an unclassified tool runs once and needs approval).

    Raises:
        ConfigurationError: From ``OpenAIAgentsRunner`` for an agent it cannot run durably, or
            from ``AgentSessionFlow`` for a blank ``flow_type``.
        ConfigurationTypeError: From ``AgentSessionFlow`` when ``options`` need a capability the
            runner lacks (compaction, plan mode).

    Example:
        >>> flow = openai_agents_session_flow(
        ...     agent,
        ...     flow_type="SupportAgent",
        ...     options=AgentSessionOptions(
        ...         tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}
        ...     ),
        ... )
        >>> registry = Registry([flow], agent_codec_registry(), allow_async_handlers=True)
    """
    runner = agent if isinstance(agent, OpenAIAgentsRunner) else OpenAIAgentsRunner(agent)
    return AgentSessionFlow(runner, flow_type=flow_type, options=options)
