"""The session policy of a Pydantic AI tool call: effect and approval from the tool's definition.

An explicit ``ToolPolicy`` in ``AgentSessionOptions.tool_policies`` wins. Otherwise the effect comes
from the tool's metadata (:func:`dex_tool_metadata`), else from MCP annotations that Pydantic AI's
MCP toolsets put in ``ToolDefinition.metadata["annotations"]``, else the session default. A tool
defined with Pydantic AI's ``requires_approval=True`` (kind ``unapproved``) waits for the session's
approval; ``dex_tool_metadata(requires_approval=...)`` sets it either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from dex_agents import (
    AgentTurnContext,
    ConfigurationError,
    ResolvedToolPolicy,
    ToolEffect,
    tool_effect_from_mcp_tool_annotations,
)
from dex_agents.adapters import UNKNOWN_TOOL_POLICY
from pydantic_ai.tools import ToolDefinition

__all__ = ["DEX_TOOL_METADATA_KEY", "dex_tool_metadata", "tool_call_policy"]

DEX_TOOL_METADATA_KEY: Final = "dex_agents"
"""Key in a Pydantic AI tool's ``metadata`` under which :func:`dex_tool_metadata` puts its policy."""


def dex_tool_metadata(
    effect: ToolEffect | str, *, requires_approval: bool | None = None
) -> dict[str, object]:
    """Tool metadata that tells the session a Pydantic AI tool's effect (and approval).

    Pass it as ``metadata=`` of ``Tool``, ``@agent.tool`` or ``FunctionToolset.add_function``. An
    explicit ``ToolPolicy`` for the tool in ``AgentSessionOptions.tool_policies`` wins over it.

    Raises:
        ConfigurationError: When ``effect`` is not a ``ToolEffect`` value, or ``requires_approval``
            is not a bool or None.

    Example:
        >>> dex_tool_metadata(ToolEffect.READ)
        {'dex_agents': {'effect': 'read'}}
    """
    try:
        value = ToolEffect(effect)
    except ValueError as error:
        known = ", ".join(item.value for item in ToolEffect)
        raise ConfigurationError(f"unknown tool effect {effect!r}; use one of {known}") from error
    policy: dict[str, object] = {"effect": value.value}
    if requires_approval is not None:
        if not isinstance(requires_approval, bool):
            raise ConfigurationError(
                f"requires_approval must be a bool or None, got {requires_approval!r}"
            )
        policy["requires_approval"] = requires_approval
    return {DEX_TOOL_METADATA_KEY: policy}


def tool_call_policy(
    turn: AgentTurnContext, tool_name: str, tool_def: ToolDefinition | None
) -> ResolvedToolPolicy:
    """The policy of a call of ``tool_name``, offered as ``tool_def`` (``None``: not offered).

    A built-in tool is a read without approval (the session routes it). A name the model was not
    offered fails in its tool Step as an unknown tool, so it needs no approval.

    Raises:
        ValueError: When the tool's metadata names an unknown effect.
    """
    if tool_name in turn.enabled_built_in_tools:
        return turn.resolve_tool_policy(tool_name, ToolEffect.READ)
    if tool_def is None:
        return UNKNOWN_TOOL_POLICY
    metadata = tool_def.metadata or {}
    own = metadata.get(DEX_TOOL_METADATA_KEY)
    own_policy: Mapping[str, object] = own if isinstance(own, Mapping) else {}
    effect = _metadata_effect(tool_name, own_policy.get("effect"))
    if effect is None and isinstance(metadata.get("annotations"), Mapping):
        effect = tool_effect_from_mcp_tool_annotations(metadata["annotations"])
    policy = turn.resolve_tool_policy(tool_name, effect)
    if tool_name in turn.tool_policies:
        return policy
    approval = own_policy.get("requires_approval")
    if isinstance(approval, bool):
        return ResolvedToolPolicy(policy.effect, approval)
    if tool_def.kind == "unapproved":
        return ResolvedToolPolicy(policy.effect, True)
    return policy


def _metadata_effect(tool_name: str, value: object) -> ToolEffect | None:
    if value is None:
        return None
    try:
        return ToolEffect(str(value))
    except ValueError as error:
        raise ConfigurationError(
            f"tool {tool_name} declares the unknown effect {value!r} in its "
            f"metadata[{DEX_TOOL_METADATA_KEY!r}]; use dex_tool_metadata()"
        ) from error
