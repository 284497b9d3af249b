"""Tool effects, per-tool policies, and how the session runs each effect.

Every tool call of an agent session runs in its own Step. The call's :class:`ToolEffect` picks that
Step, its retries, what a crash means, and whether the call waits for approval by default:

| Effect | Step | Attempts | After the last failed attempt | Default approval |
|---|---|---|---|---|
| ``read`` | ``CallTool`` | 3 | ``failed`` | no |
| ``idempotent_write`` | ``CallTool`` | 3 | ``outcome_unknown`` | no |
| ``non_idempotent_write`` | ``CallSingleAttemptTool`` | 1 | ``outcome_unknown`` | yes |
| ``unclassified`` | ``CallSingleAttemptTool`` | 1 | ``outcome_unknown`` | yes |

A :class:`ToolPolicy` overrides the effect and the approval default per tool name; it wins over
framework metadata (such as MCP annotations), which wins over the session's default effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from dex_agents._enum_values import enum_member
from dex_agents._tool_outcome_check import ToolOutcomeCheck
from dex_agents.exceptions import ConfigurationError, ConfigurationTypeError

__all__ = [
    "DEFAULT_TOOL_EFFECT",
    "TOOL_EFFECT_RULES",
    "McpToolAnnotations",
    "ResolvedToolPolicy",
    "ToolEffect",
    "ToolEffectRules",
    "ToolPolicy",
    "ToolStepType",
    "is_approval_required",
    "resolve_tool_policy",
    "tool_effect_from_mcp_tool_annotations",
    "tool_effect_rules",
]


class ToolEffect(StrEnum):
    """Side effect class of a tool; it decides the tool Step, retries, and default approval.

    Example:
        >>> ToolEffect("read") is ToolEffect.READ
        True
    """

    READ = "read"
    """Reads only; a retry or a crash rerun is harmless."""
    IDEMPOTENT_WRITE = "idempotent_write"
    """Writes, and repeating the call with the same idempotency key has no further effect."""
    NON_IDEMPOTENT_WRITE = "non_idempotent_write"
    """Writes, and a repeat could apply the write twice; runs at most once."""
    UNCLASSIFIED = "unclassified"
    """Nothing is known about the tool; treated like a non-idempotent write."""


DEFAULT_TOOL_EFFECT: Final = ToolEffect.UNCLASSIFIED
"""Effect of a tool without a policy or framework metadata, unless the session sets another."""


class ToolStepType(StrEnum):
    """Step type that runs one tool call, as it appears in the Flow history."""

    CALL_TOOL = "CallTool"
    CALL_SINGLE_ATTEMPT_TOOL = "CallSingleAttemptTool"


@dataclass(frozen=True)
class ToolEffectRules:
    """How the session runs a call of one effect; one row of the effect table.

    Attributes:
        step_type: The tool Step that runs the call.
        max_attempts: Attempts of that Step: 3 for ``CallTool``, 1 for ``CallSingleAttemptTool``.
        requires_approval_by_default: Whether a call waits in ``AwaitToolApproval`` when its
            policy leaves ``requires_approval`` unset.
        is_outcome_unknown_after_failure: Whether a call whose attempts all failed with an error
            other than ``ToolExecutionError`` records ``outcome_unknown`` (the write may have taken
            effect) rather than ``failed``.
        failure_step_type: The failure route of the tool Step.

    Example:
        >>> tool_effect_rules(ToolEffect.READ).max_attempts
        3
    """

    step_type: ToolStepType
    max_attempts: int
    requires_approval_by_default: bool
    is_outcome_unknown_after_failure: bool
    failure_step_type: str


TOOL_EFFECT_RULES: Final[Mapping[ToolEffect, ToolEffectRules]] = {
    ToolEffect.READ: ToolEffectRules(
        step_type=ToolStepType.CALL_TOOL,
        max_attempts=3,
        requires_approval_by_default=False,
        is_outcome_unknown_after_failure=False,
        failure_step_type="RecordToolFailure",
    ),
    ToolEffect.IDEMPOTENT_WRITE: ToolEffectRules(
        step_type=ToolStepType.CALL_TOOL,
        max_attempts=3,
        requires_approval_by_default=False,
        is_outcome_unknown_after_failure=True,
        failure_step_type="RecordToolFailure",
    ),
    ToolEffect.NON_IDEMPOTENT_WRITE: ToolEffectRules(
        step_type=ToolStepType.CALL_SINGLE_ATTEMPT_TOOL,
        max_attempts=1,
        requires_approval_by_default=True,
        is_outcome_unknown_after_failure=True,
        failure_step_type="RecordToolOutcomeUnknown",
    ),
    ToolEffect.UNCLASSIFIED: ToolEffectRules(
        step_type=ToolStepType.CALL_SINGLE_ATTEMPT_TOOL,
        max_attempts=1,
        requires_approval_by_default=True,
        is_outcome_unknown_after_failure=True,
        failure_step_type="RecordToolOutcomeUnknown",
    ),
}
"""The effect table, one :class:`ToolEffectRules` per :class:`ToolEffect`."""


def tool_effect_rules(effect: ToolEffect | str) -> ToolEffectRules:
    """Return the row of the effect table for ``effect``.

    Raises:
        ConfigurationError: When ``effect`` is not a known effect.

    Example:
        >>> tool_effect_rules("unclassified").step_type
        <ToolStepType.CALL_SINGLE_ATTEMPT_TOOL: 'CallSingleAttemptTool'>
    """
    return TOOL_EFFECT_RULES[_require_effect(effect, "effect")]


def is_approval_required(effect: ToolEffect | str, requires_approval: bool | None = None) -> bool:
    """Return whether a call waits for approval.

    An explicit ``requires_approval`` wins; ``None`` means the effect's default: ``True`` for
    ``non_idempotent_write`` and ``unclassified``, ``False`` for ``read`` and ``idempotent_write``.

    Raises:
        ConfigurationError: When ``effect`` is not a known effect.

    Example:
        >>> is_approval_required(ToolEffect.NON_IDEMPOTENT_WRITE)
        True
        >>> is_approval_required(ToolEffect.READ, requires_approval=True)
        True
    """
    if requires_approval is not None:
        return requires_approval
    return tool_effect_rules(effect).requires_approval_by_default


@dataclass(frozen=True)
class ToolPolicy:
    """Per-tool override of the effect and approval defaults.

    Pass policies by tool name in ``AgentSessionOptions.tool_policies``. A policy wins over framework
    metadata such as MCP annotations and over ``AgentSessionOptions.default_tool_effect``.

    Attributes:
        effect: Effect of the tool.
        requires_approval: Whether every call waits for ``resolve_interrupt`` before it runs;
            ``None`` uses the effect's default (see :func:`is_approval_required`).
        outcome_check: For a single-attempt effect (``non_idempotent_write``, ``unclassified``):
            what the session asks when a call's attempt was lost, before it records anything
            (see :class:`~dex_agents.ToolOutcomeCheck`); ``None`` records ``outcome_unknown``.

    Raises:
        ConfigurationError: When ``effect`` is not a known effect, or an outcome check is
            declared for a ``read`` or ``idempotent_write`` tool (those run again instead).
        ConfigurationTypeError: When ``outcome_check`` is not a ToolOutcomeCheck.

    Example:
        >>> policies = {"refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)}
    """

    effect: ToolEffect
    requires_approval: bool | None = None
    outcome_check: ToolOutcomeCheck | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "effect", _require_effect(self.effect, "ToolPolicy.effect"))
        if self.requires_approval is not None and not isinstance(self.requires_approval, bool):
            raise ConfigurationError(
                f"ToolPolicy.requires_approval must be a bool or None, got {self.requires_approval!r}"
            )
        _require_outcome_check(self.effect, self.outcome_check)

    def resolve(self) -> ResolvedToolPolicy:
        """Return this policy with its approval default applied.

        Example:
            >>> ToolPolicy(ToolEffect.READ).resolve().requires_approval
            False
        """
        return ResolvedToolPolicy(
            self.effect, is_approval_required(self.effect, self.requires_approval)
        )


@dataclass(frozen=True)
class ResolvedToolPolicy:
    """Effective policy of one tool, returned by :func:`resolve_tool_policy`.

    Attributes:
        effect: Effective effect after policies, framework metadata, and the session default.
        requires_approval: Effective approval requirement.

    Example:
        >>> ResolvedToolPolicy(ToolEffect.READ, requires_approval=False).step_type
        <ToolStepType.CALL_TOOL: 'CallTool'>
    """

    effect: ToolEffect
    requires_approval: bool

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "effect", _require_effect(self.effect, "ResolvedToolPolicy.effect")
        )
        if not isinstance(self.requires_approval, bool):
            raise ConfigurationError(
                f"ResolvedToolPolicy.requires_approval must be a bool, got {self.requires_approval!r}"
            )

    @property
    def step_type(self) -> ToolStepType:
        """The tool Step that runs a call with this policy."""
        return TOOL_EFFECT_RULES[self.effect].step_type


def resolve_tool_policy(
    tool_name: str,
    tool_policies: Mapping[str, ToolPolicy] | None = None,
    default_tool_effect: ToolEffect | str = DEFAULT_TOOL_EFFECT,
    framework_effect: ToolEffect | str | None = None,
) -> ResolvedToolPolicy:
    """Return the effective policy of one tool.

    Runners normally call ``AgentTurnContext.resolve_tool_policy``; call this function when an
    adapter classifies tools outside a turn, for example while building framework tool wrappers.
    Precedence: the tool's :class:`ToolPolicy`, then ``framework_effect``, then
    ``default_tool_effect``. Without an explicit ``requires_approval``, the effect's default applies.

    Args:
        tool_name: Tool name as the model calls it.
        tool_policies: Explicit policies by tool name.
        default_tool_effect: Effect of a tool without a policy or framework metadata.
        framework_effect: Effect declared by framework metadata, or ``None``.

    Returns:
        The effective policy.

    Raises:
        ConfigurationError: When an effect is unknown or a policy value is not a :class:`ToolPolicy`.

    Example:
        >>> resolve_tool_policy("search", {"search": ToolPolicy(ToolEffect.READ)})
        ResolvedToolPolicy(effect=<ToolEffect.READ: 'read'>, requires_approval=False)
    """
    policy = (tool_policies or {}).get(tool_name)
    if policy is not None:
        if not isinstance(policy, ToolPolicy):
            raise ConfigurationError(
                f"tool_policies[{tool_name!r}] must be a ToolPolicy, got {type(policy).__name__}"
            )
        return policy.resolve()
    if framework_effect is not None:
        effect = _require_effect(framework_effect, "framework_effect")
    else:
        effect = _require_effect(default_tool_effect, "default_tool_effect")
    return ResolvedToolPolicy(effect, is_approval_required(effect))


_ANNOTATION_SPELLINGS: Final = (
    ("read_only_hint", "readOnlyHint"),
    ("idempotent_hint", "idempotentHint"),
    ("destructive_hint", "destructiveHint"),
)
"""Each hint's field name (MCP SDK 2, snake_case) and its name on the wire (camelCase)."""


@dataclass(frozen=True)
class McpToolAnnotations:
    """MCP tool annotations that classify a tool's side effects (hints from the tool server).

    Attributes:
        read_only_hint: MCP ``readOnlyHint``: the tool does not modify its environment.
        idempotent_hint: MCP ``idempotentHint``: repeated calls with the same arguments have no
            additional effect.
        destructive_hint: MCP ``destructiveHint``: the tool may perform destructive updates.

    Example:
        >>> McpToolAnnotations.from_mapping({"readOnlyHint": True}).read_only_hint
        True
    """

    read_only_hint: bool | None = None
    idempotent_hint: bool | None = None
    destructive_hint: bool | None = None

    @classmethod
    def from_mapping(cls, annotations: Mapping[str, object]) -> McpToolAnnotations:
        """Read annotations as an MCP server sends them (camelCase) or in snake_case.

        Values other than booleans are ignored, as hints that say nothing.

        Example:
            >>> McpToolAnnotations.from_mapping({"idempotent_hint": True}).idempotent_hint
            True
        """

        def hint(snake: str, camel: str) -> bool | None:
            value = annotations.get(camel, annotations.get(snake))
            return value if isinstance(value, bool) else None

        return cls(**{snake: hint(snake, camel) for snake, camel in _ANNOTATION_SPELLINGS})


def tool_effect_from_mcp_tool_annotations(
    annotations: McpToolAnnotations | Mapping[str, object] | object,
) -> ToolEffect | None:
    """Map MCP tool annotations to a framework effect for ``resolve_tool_policy``.

    Annotations are hints from the tool server; pass the result only for servers the application
    trusts. Accepts :class:`McpToolAnnotations`, a mapping (camelCase or snake_case keys), or any
    object with ``readOnlyHint``/``read_only_hint``-style attributes (such as the MCP SDK's
    ``ToolAnnotations``).

    Returns:
        ``READ`` when ``readOnlyHint`` is true; otherwise ``IDEMPOTENT_WRITE`` when
        ``idempotentHint`` is true, whatever ``destructiveHint`` says; otherwise ``None``, so the
        session default applies.

    Example:
        >>> tool_effect_from_mcp_tool_annotations({"readOnlyHint": True})
        <ToolEffect.READ: 'read'>
        >>> tool_effect_from_mcp_tool_annotations({"destructiveHint": True}) is None
        True
    """
    parsed = _parse_annotations(annotations)
    if parsed.read_only_hint is True:
        return ToolEffect.READ
    if parsed.idempotent_hint is True:
        return ToolEffect.IDEMPOTENT_WRITE
    return None


def _parse_annotations(annotations: object) -> McpToolAnnotations:
    if isinstance(annotations, McpToolAnnotations):
        return annotations
    if annotations is None:
        return McpToolAnnotations()
    if isinstance(annotations, Mapping):
        return McpToolAnnotations.from_mapping(annotations)
    # An SDK annotation object: the snake_case field where it has one (MCP SDK 2, whose camelCase
    # names are deprecated aliases that warn on every read), else the camelCase one (MCP SDK 1).
    found: dict[str, object] = {}
    for spellings in _ANNOTATION_SPELLINGS:
        name = next((name for name in spellings if hasattr(annotations, name)), None)
        if name is not None:
            found[name] = getattr(annotations, name)
    return McpToolAnnotations.from_mapping(found)


def _require_outcome_check(effect: ToolEffect, check: object) -> None:
    if check is None:
        return
    if not isinstance(check, ToolOutcomeCheck):
        raise ConfigurationTypeError(
            f"ToolPolicy.outcome_check must be a ToolOutcomeCheck or None, got {type(check).__name__}"
        )
    if TOOL_EFFECT_RULES[effect].step_type is not ToolStepType.CALL_SINGLE_ATTEMPT_TOOL:
        raise ConfigurationError(
            f"an outcome check is for non_idempotent_write and unclassified tools, not "
            f"{effect.value}: a lost {effect.value} call runs again with the same key"
        )


def _require_effect(value: object, what: str) -> ToolEffect:
    return enum_member(ToolEffect, value, what)
