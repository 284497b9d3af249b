"""The session Flow of a Google ADK agent."""

from __future__ import annotations

from dex_agents import AgentSessionFlow, AgentSessionOptions
from google.adk.agents.llm_agent import LlmAgent
from google.adk.agents.run_config import RunConfig
from google.adk.apps import App

from dex_agents_google_adk._runner import (
    DEFAULT_USER_ID,
    GoogleAdkRunner,
    ModelResolver,
)

__all__ = ["google_adk_session_flow"]


def google_adk_session_flow(
    agent: LlmAgent | App,
    *,
    flow_type: str,
    options: AgentSessionOptions | None = None,
    resolve_model: ModelResolver | None = None,
    run_config: RunConfig | None = None,
    app_name: str | None = None,
    user_id: str = DEFAULT_USER_ID,
    trust_mcp_tool_annotations: bool = True,
    summary_max_output_tokens: int | None = None,
) -> AgentSessionFlow:
    """The durable session Flow of an ADK ``LlmAgent`` (or ``App``): a :class:`GoogleAdkRunner`
    (its arguments are the runner's) with ``options``.

    ADK tools carry no side-effect metadata, so classify them with
    ``AgentSessionOptions.tool_policies`` (an unclassified tool runs once, after approval).

    Raises:
        ConfigurationError: From :class:`GoogleAdkRunner` for an agent it cannot run.
        ValueError: From ``AgentSessionFlow`` for an invalid ``flow_type`` or options.

    Example:
        >>> flow = google_adk_session_flow(
        ...     support_agent,
        ...     flow_type="SupportAgent",
        ...     options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
        ... )
        >>> registry = Registry([flow], agent_codec_registry(), allow_async_handlers=True)
    """
    runner = GoogleAdkRunner(
        agent,
        resolve_model=resolve_model,
        run_config=run_config,
        app_name=app_name,
        user_id=user_id,
        trust_mcp_tool_annotations=trust_mcp_tool_annotations,
        summary_max_output_tokens=summary_max_output_tokens,
    )
    return AgentSessionFlow(runner, flow_type=flow_type, options=options)
