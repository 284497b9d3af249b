"""``langgraph_session_flow``: the session Flow of a compiled graph in one call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dex_agents import AgentSessionFlow, AgentSessionOptions, ConfigurationError, ToolTaskPoller

from dex_agents_langgraph._runner import ContextFactory, LangGraphRunner, SummaryModel

__all__ = ["langgraph_session_flow"]


def langgraph_session_flow(
    graph: object,
    *,
    flow_type: str,
    options: AgentSessionOptions | None = None,
    messages_key: str = "messages",
    tool_nodes: Sequence[str] | None = None,
    summary_model: SummaryModel | None = None,
    context: ContextFactory | None = None,
    tool_task_pollers: Mapping[str, ToolTaskPoller] | None = None,
    recursion_limit: int = 25,
) -> AgentSessionFlow:
    """Build the durable session Flow of a compiled LangGraph graph.

    The runner's arguments are :class:`LangGraphRunner`'s; ``options`` are the session's.

    Raises:
        ConfigurationError: When ``options`` set a compaction policy but no ``summary_model`` is
            given, or for any of :class:`LangGraphRunner`'s reasons.
        ConfigurationTypeError: For any of :class:`LangGraphRunner`'s reasons.

    Example:
        >>> flow = langgraph_session_flow(
        ...     create_react_agent(model, [lookup_order]),
        ...     flow_type="SupportAgent",
        ...     options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
        ... )
    """
    runner = LangGraphRunner(
        graph,
        messages_key=messages_key,
        tool_nodes=tool_nodes,
        summary_model=summary_model,
        context=context,
        tool_task_pollers=tool_task_pollers,
        recursion_limit=recursion_limit,
    )
    if options is not None and options.compaction is not None and summary_model is None:
        raise ConfigurationError(
            f"flow {flow_type}: the options set a compaction policy, so the runner needs a "
            "summary_model= chat model to write the summaries"
        )
    return AgentSessionFlow(runner, flow_type=flow_type, options=options)
