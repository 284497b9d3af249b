"""``pydantic_ai_session_flow``: the session Flow of a Pydantic AI agent."""

from __future__ import annotations

from typing import Any

from dex_agents import AgentSessionFlow, AgentSessionOptions
from pydantic_ai import Agent

from dex_agents_pydantic_ai._runner import PydanticAIRunner

__all__ = ["pydantic_ai_session_flow"]


def pydantic_ai_session_flow(
    agent: Agent[Any, Any],
    flow_type: str,
    options: AgentSessionOptions | None = None,
    **runner_options: Any,
) -> AgentSessionFlow:
    """The session Flow of ``agent``: a :class:`PydanticAIRunner` with ``runner_options``.

    Raises:
        ConfigurationError: From :class:`PydanticAIRunner`, or from ``AgentSessionFlow`` for a
            blank ``flow_type``.
        ConfigurationTypeError: From ``AgentSessionFlow`` when ``options`` need a capability the
            runner lacks (compaction, plan mode).

    Example:
        >>> flow = pydantic_ai_session_flow(agent, "OrdersAgent",
        ...     AgentSessionOptions(built_in_tools=frozenset({BuiltInTool.ASK_USER})))
    """
    runner = PydanticAIRunner(agent, **runner_options)
    return AgentSessionFlow(runner, flow_type=flow_type, options=options)
