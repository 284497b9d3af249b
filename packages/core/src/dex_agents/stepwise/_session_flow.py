"""The session Flow of a Stepwise agent, and its options derived from the AgentDefinition."""

from __future__ import annotations

import dataclasses

from dex_agents._session.flow import AgentSessionFlow
from dex_agents._session.options import AgentSessionOptions
from dex_agents._tool_policy import ToolPolicy
from dex_agents.exceptions import ConfigurationError
from dex_agents.stepwise._agent_definition import AgentDefinition
from dex_agents.stepwise._runner import StepwiseAgentRunner

__all__ = ["stepwise_agent_session_flow", "stepwise_agent_session_options"]


def stepwise_agent_session_options(definition: AgentDefinition) -> AgentSessionOptions:
    """Derives the session options of a Stepwise agent from its definition.

    Each function tool's own effect and approval become its policy; the definition's
    ``tool_policies`` win over them. ``default_tool_effect``, ``built_in_tools``,
    ``interrupt_deadline``, ``event_stream_capacity_bytes``, ``plan_mode_enabled``, and
    ``compaction`` carry over. Change anything else with ``dataclasses.replace``.

    Raises:
        ConfigurationError: When the definition sets an option this build's AgentSessionOptions lacks.

    Example:
        >>> from dataclasses import replace
        >>> options = replace(stepwise_agent_session_options(support_agent), message_window_size=128)
        >>> options.message_window_size, options.tool_policies["lookup_order"].effect.value
        (128, 'read')
    """
    policies: dict[str, ToolPolicy] = {tool.name: tool.policy for tool in definition.tools}
    policies.update(definition.tool_policies)
    values: dict[str, object] = {
        "tool_policies": policies,
        "default_tool_effect": definition.default_tool_effect,
        "interrupt_deadline": definition.interrupt_deadline,
        "event_stream_capacity_bytes": definition.event_stream_capacity_bytes,
    }
    # Options that later issues add to AgentSessionOptions; passed only when the definition uses
    # them, so a definition without them works whichever options this build has.
    optional: dict[str, object] = {
        "built_in_tools": definition.built_in_tools,
        "plan_mode_enabled": definition.plan_mode_enabled,
        "compaction": definition.compaction,
    }
    known = {item.name for item in dataclasses.fields(AgentSessionOptions)}
    for name, value in optional.items():
        if name in known:
            values[name] = value
        elif value:
            raise ConfigurationError(
                f"AgentDefinition.{name} is not supported by this AgentSessionOptions"
            )
    return AgentSessionOptions(**values)  # type: ignore[arg-type]


def stepwise_agent_session_flow(
    definition: AgentDefinition,
    flow_type: str,
    options: AgentSessionOptions | None = None,
) -> AgentSessionFlow:
    """The session Flow of a Stepwise agent: a StepwiseAgentRunner with the derived options.

    ``options`` replaces the derived options, such as a ``dataclasses.replace`` of
    ``stepwise_agent_session_options(definition)``.

    Raises:
        ConfigurationError: From AgentSessionFlow for an invalid ``flow_type`` or options.

    Example:
        >>> from dex import Registry
        >>> flow = stepwise_agent_session_flow(support_agent, flow_type="SupportAgent")
        >>> registry = Registry([flow], allow_async_handlers=True)
    """
    return AgentSessionFlow(
        StepwiseAgentRunner(definition),
        flow_type=flow_type,
        options=options if options is not None else stepwise_agent_session_options(definition),
    )
