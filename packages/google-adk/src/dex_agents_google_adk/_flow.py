"""The session Flow of a Google ADK agent."""

from __future__ import annotations

from typing import Any

from dex_agents import AgentSessionFlow, AgentSessionOptions
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App

from dex_agents_google_adk._runner import GoogleAdkRunner

__all__ = ["google_adk_session_flow"]


def google_adk_session_flow(
    agent: LlmAgent | App,
    *,
    flow_type: str,
    options: AgentSessionOptions | None = None,
    **runner_options: Any,
) -> AgentSessionFlow:
    """The durable session Flow of an ADK ``LlmAgent`` (or ``App``): a :class:`GoogleAdkRunner`
    with ``runner_options`` (its keyword arguments: ``resolve_model``, ``run_config``,
    ``app_name``, ``user_id``, ...) and ``options``.

    ADK tools carry no side-effect metadata, so classify them with
    ``AgentSessionOptions.tool_policies`` (an unclassified tool runs once, after approval).

    Raises:
        ConfigurationError: From :class:`GoogleAdkRunner` for an agent it cannot run, or from
            ``AgentSessionFlow`` for a blank ``flow_type``.
        ConfigurationTypeError: From ``AgentSessionFlow`` when ``options`` need a capability the
            runner lacks (compaction, plan mode).
        TypeError: For a keyword argument :class:`GoogleAdkRunner` does not take.

    Example:
        >>> flow = google_adk_session_flow(
        ...     support_agent,
        ...     flow_type="SupportAgent",
        ...     options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
        ... )
        >>> registry = Registry([flow], agent_codec_registry(), allow_async_handlers=True)
    """
    runner = GoogleAdkRunner(agent, **runner_options)
    return AgentSessionFlow(runner, flow_type=flow_type, options=options)
