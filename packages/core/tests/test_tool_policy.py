"""Tool effects and policies: the effect table, precedence, approval defaults, MCP annotations."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import pytest
from dex_agents import (
    ConfigurationError,
    McpToolAnnotations,
    ResolvedToolPolicy,
    ToolEffect,
    ToolPolicy,
    is_approval_required,
    tool_effect_from_mcp_tool_annotations,
)
from dex_agents._tool_policy import (
    DEFAULT_TOOL_EFFECT,
    ToolStepType,
    resolve_tool_policy,
    tool_effect_rules,
)


@pytest.mark.parametrize(
    ("effect", "step_type", "attempts", "approval", "outcome_unknown_after_failure", "route"),
    [
        (ToolEffect.READ, ToolStepType.CALL_TOOL, 3, False, False, "RecordToolFailure"),
        (ToolEffect.IDEMPOTENT_WRITE, ToolStepType.CALL_TOOL, 3, False, True, "RecordToolFailure"),
        (
            ToolEffect.NON_IDEMPOTENT_WRITE,
            ToolStepType.CALL_SINGLE_ATTEMPT_TOOL,
            1,
            True,
            True,
            "RecordToolOutcomeUnknown",
        ),
        (
            ToolEffect.UNCLASSIFIED,
            ToolStepType.CALL_SINGLE_ATTEMPT_TOOL,
            1,
            True,
            True,
            "RecordToolOutcomeUnknown",
        ),
    ],
)
def test_effect_table_row(
    effect: ToolEffect,
    step_type: ToolStepType,
    attempts: int,
    approval: bool,
    outcome_unknown_after_failure: bool,
    route: str,
) -> None:
    rules = tool_effect_rules(effect)
    assert rules.step_type is step_type
    assert rules.step_type.value in ("CallTool", "CallSingleAttemptTool")
    assert rules.max_attempts == attempts
    assert rules.requires_approval_by_default is approval
    assert rules.is_outcome_unknown_after_failure is outcome_unknown_after_failure
    assert rules.failure_step_type == route
    assert is_approval_required(effect) is approval
    assert ToolPolicy(effect).resolve() == ResolvedToolPolicy(effect, approval)
    assert ResolvedToolPolicy(effect, approval).step_type is step_type


def test_effect_wire_values_are_the_documented_strings() -> None:
    assert [effect.value for effect in ToolEffect] == [
        "read",
        "idempotent_write",
        "non_idempotent_write",
        "unclassified",
    ]
    assert DEFAULT_TOOL_EFFECT is ToolEffect.UNCLASSIFIED


def test_explicit_approval_overrides_the_effect_default() -> None:
    assert is_approval_required(ToolEffect.READ, requires_approval=True) is True
    assert is_approval_required(ToolEffect.UNCLASSIFIED, requires_approval=False) is False
    policy = ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)
    assert policy.resolve() == ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, True)


def test_policy_wins_over_framework_effect_and_default() -> None:
    policies = {"search": ToolPolicy(ToolEffect.READ)}
    resolved = resolve_tool_policy(
        "search", policies, ToolEffect.NON_IDEMPOTENT_WRITE, ToolEffect.IDEMPOTENT_WRITE
    )
    assert resolved == ResolvedToolPolicy(ToolEffect.READ, False)


def test_framework_effect_wins_over_default() -> None:
    resolved = resolve_tool_policy("lookup", {}, ToolEffect.UNCLASSIFIED, ToolEffect.READ)
    assert resolved == ResolvedToolPolicy(ToolEffect.READ, False)


def test_default_effect_applies_without_policy_or_metadata() -> None:
    assert resolve_tool_policy("anything") == ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, True)
    assert resolve_tool_policy("anything", None, ToolEffect.IDEMPOTENT_WRITE) == ResolvedToolPolicy(
        ToolEffect.IDEMPOTENT_WRITE, False
    )


def test_policy_of_another_tool_does_not_apply() -> None:
    policies = {"search": ToolPolicy(ToolEffect.READ)}
    assert resolve_tool_policy("refund", policies).effect is ToolEffect.UNCLASSIFIED


def test_effect_given_as_plain_string_is_accepted() -> None:
    assert ToolPolicy("read").effect is ToolEffect.READ  # type: ignore[arg-type]
    assert resolve_tool_policy("t", None, "idempotent_write").effect is ToolEffect.IDEMPOTENT_WRITE


@pytest.mark.parametrize("bad", ["write", "", None, 3])
def test_unknown_effect_is_a_clear_error(bad: object) -> None:
    with pytest.raises(
        ValueError, match=r"ToolPolicy\.effect must be one of read, idempotent_write"
    ):
        ToolPolicy(bad)  # type: ignore[arg-type]


def test_unknown_default_effect_names_the_argument() -> None:
    with pytest.raises(ConfigurationError, match="default_tool_effect"):
        resolve_tool_policy("t", None, "sometimes")


def test_policy_value_of_wrong_type_names_the_tool() -> None:
    with pytest.raises(ConfigurationError, match=r"tool_policies\['t'\] must be a ToolPolicy"):
        resolve_tool_policy("t", {"t": "read"})  # type: ignore[dict-item]


def test_requires_approval_must_be_bool() -> None:
    with pytest.raises(ConfigurationError, match="requires_approval"):
        ToolPolicy(ToolEffect.READ, requires_approval="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({"readOnlyHint": True}, ToolEffect.READ),
        ({"readOnlyHint": True, "idempotentHint": True}, ToolEffect.READ),
        ({"idempotentHint": True}, ToolEffect.IDEMPOTENT_WRITE),
        ({"idempotentHint": True, "destructiveHint": True}, ToolEffect.IDEMPOTENT_WRITE),
        ({"destructiveHint": True}, None),
        ({"readOnlyHint": False, "idempotentHint": False}, None),
        ({}, None),
        ({"read_only_hint": True}, ToolEffect.READ),
        ({"readOnlyHint": "true"}, None),
    ],
)
def test_mcp_annotations_map_to_framework_effect(
    annotations: dict[str, object], expected: ToolEffect | None
) -> None:
    assert tool_effect_from_mcp_tool_annotations(annotations) is expected
    parsed = McpToolAnnotations.from_mapping(annotations)
    assert tool_effect_from_mcp_tool_annotations(parsed) is expected


def test_mcp_annotations_from_sdk_like_object() -> None:
    @dataclass
    class SdkAnnotations:
        readOnlyHint: bool | None = None
        idempotentHint: bool | None = None

    assert tool_effect_from_mcp_tool_annotations(SdkAnnotations(idempotentHint=True)) is (
        ToolEffect.IDEMPOTENT_WRITE
    )
    assert tool_effect_from_mcp_tool_annotations(None) is None


def test_mcp_sdk_annotations_are_read_without_its_deprecation_warnings() -> None:
    """MCP SDK 2 renamed the hints to snake_case; FastMCP, once imported, puts the camelCase names
    back as aliases that warn on every read."""
    pytest.importorskip("fastmcp")
    mcp_types = pytest.importorskip("mcp.types")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read = mcp_types.ToolAnnotations(readOnlyHint=True)
        write = mcp_types.ToolAnnotations(readOnlyHint=False, idempotentHint=True)
        assert tool_effect_from_mcp_tool_annotations(read) is ToolEffect.READ
        assert tool_effect_from_mcp_tool_annotations(write) is ToolEffect.IDEMPOTENT_WRITE


def test_mcp_effect_feeds_policy_resolution_but_explicit_policy_still_wins() -> None:
    effect = tool_effect_from_mcp_tool_annotations({"readOnlyHint": True})
    policies = {"files__delete": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)}
    assert resolve_tool_policy("files__read", policies, DEFAULT_TOOL_EFFECT, effect).effect is (
        ToolEffect.READ
    )
    assert resolve_tool_policy("files__delete", policies, DEFAULT_TOOL_EFFECT, effect) == (
        ResolvedToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, True)
    )
