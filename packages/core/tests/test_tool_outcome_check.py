"""The outcome check's values and decisions, without an engine (the Worker-kill runs are in
test_agent_session_flow_outcome_check.py and the shared suite's test_outcome_checks.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from dex_agents import (
    TOOL_CALL_NOT_APPLIED_ERROR_PREFIX,
    AgentToolCall,
    AgentToolCallStatus,
    ConfigurationError,
    ConfigurationTypeError,
    ToolEffect,
    ToolOutcomeCheck,
    ToolOutcomeCheckRequest,
    ToolOutcomeCheckResult,
    ToolOutcomeCheckStatus,
    ToolPolicy,
)
from dex_agents._session.outcome_checks import (
    apply_outcome_check,
    begin_outcome_check,
    is_outcome_checkable,
    outcome_check_request,
)
from dex_agents._session.transitions import finalize_tool_call
from dex_agents.stepwise import (
    AgentDefinition,
    ScriptedModelClient,
    ScriptedModelReply,
    function_tool,
    stepwise_agent_session_options,
)

REQUEST = ToolOutcomeCheckRequest("refund", '{"order": 7}', "s/turn-1/c1", "s", "turn-1", "c1")


def _record(**changes: object) -> AgentToolCall:
    record = AgentToolCall(
        "c1",
        "refund",
        '{"order": 7}',
        ToolEffect.NON_IDEMPOTENT_WRITE,
        False,
        AgentToolCallStatus.APPROVED,
        "turn-3",
        0,
    )
    return replace(record, **changes)  # type: ignore[arg-type]


def _not_applied(request: ToolOutcomeCheckRequest) -> ToolOutcomeCheckResult:
    return ToolOutcomeCheckResult.not_applied("no refund")


@pytest.mark.parametrize("effect", [ToolEffect.READ, ToolEffect.IDEMPOTENT_WRITE])
def test_a_check_is_refused_for_tools_that_run_again_anyway(effect: ToolEffect) -> None:
    with pytest.raises(ConfigurationError, match="non_idempotent_write and unclassified"):
        ToolPolicy(effect, outcome_check=ToolOutcomeCheck(_not_applied))
    with pytest.raises(ConfigurationError, match="non_idempotent_write and unclassified"):
        function_tool(effect=effect, outcome_check=ToolOutcomeCheck(_not_applied))


def test_bad_declarations_get_clear_errors() -> None:
    with pytest.raises(ConfigurationTypeError, match="must be a ToolOutcomeCheck"):
        ToolPolicy(ToolEffect.UNCLASSIFIED, outcome_check=_not_applied)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationTypeError, match="must be a function"):
        ToolOutcomeCheck("refund_applied")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationTypeError, match="run_again_if_not_applied must be a bool"):
        ToolOutcomeCheck(_not_applied, run_again_if_not_applied="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs the output"):
        ToolOutcomeCheckResult("applied")
    with pytest.raises(ConfigurationError, match="a not_applied outcome has no output"):
        ToolOutcomeCheckResult("not_applied", output="refunded")
    with pytest.raises(ConfigurationError, match="applied, not_applied or unknown"):
        ToolOutcomeCheckResult("maybe")  # type: ignore[arg-type]


def test_a_check_runs_sync_or_async_and_must_answer_with_a_result() -> None:
    async def applied(request: ToolOutcomeCheckRequest) -> ToolOutcomeCheckResult:
        return ToolOutcomeCheckResult.applied(f"refunded {request.argument_values()['order']}")

    assert asyncio.run(ToolOutcomeCheck(applied).run(REQUEST)).output == "refunded 7"
    assert asyncio.run(ToolOutcomeCheck(_not_applied).run(REQUEST)).note == "no refund"
    with pytest.raises(ConfigurationTypeError, match="returned bool, not a ToolOutcomeCheckResult"):
        asyncio.run(ToolOutcomeCheck(lambda request: True).run(REQUEST))  # type: ignore[arg-type,return-value]


def test_the_request_carries_the_key_the_tool_was_given() -> None:
    request = outcome_check_request(_record(), "session-9", 0)
    assert (request.idempotency_key, request.attempt) == ("session-9/turn-3/c1", 1)
    with pytest.raises(ConfigurationError, match="not a JSON object"):
        ToolOutcomeCheckRequest("refund", "[1]", "k", "s", "t", "c").argument_values()


def test_only_a_lost_call_that_would_be_unknown_is_checked() -> None:
    record = _record()
    unknown = finalize_tool_call(record, AgentToolCallStatus.OUTCOME_UNKNOWN, error="lost")
    not_run = finalize_tool_call(record, AgentToolCallStatus.FAILED, error="not run")
    assert is_outcome_checkable(record, unknown)
    assert not is_outcome_checkable(record, not_run)  # a write that never started
    assert not is_outcome_checkable(_record(task_id="task-1"), unknown)  # a task may still run
    assert not is_outcome_checkable(begin_outcome_check(record, "lost"), unknown)


def test_not_applied_runs_again_at_most_once() -> None:
    pending = begin_outcome_check(_record(), "Worker lost")
    not_applied = ToolOutcomeCheckResult.not_applied("no refund")
    again = apply_outcome_check(pending, not_applied, run_again_if_not_applied=True)
    assert (again.status, again.outcome_check, again.run_again_count, again.error) == (
        AgentToolCallStatus.APPROVED,
        ToolOutcomeCheckStatus.NOT_APPLIED,
        1,
        None,
    )
    # The second run was lost too, and the check again found nothing: no third run.
    second = apply_outcome_check(
        begin_outcome_check(again, "lost again"), not_applied, run_again_if_not_applied=True
    )
    assert (second.status, second.outcome_check, second.run_again_count) == (
        AgentToolCallStatus.FAILED,
        ToolOutcomeCheckStatus.NOT_APPLIED,
        1,
    )
    assert second.error == f"{TOOL_CALL_NOT_APPLIED_ERROR_PREFIX}: no refund"


def test_unknown_keeps_the_lost_attempt_error() -> None:
    pending = begin_outcome_check(_record(), "Worker lost")
    final = apply_outcome_check(
        pending, ToolOutcomeCheckResult.unknown("no lookup"), run_again_if_not_applied=True
    )
    assert (final.status, final.outcome_check) == (
        AgentToolCallStatus.OUTCOME_UNKNOWN,
        ToolOutcomeCheckStatus.UNKNOWN,
    )
    assert final.error == "Worker lost; outcome check: no lookup"


def test_a_stepwise_function_tool_declares_its_check_in_its_policy() -> None:
    check = ToolOutcomeCheck(_not_applied, run_again_if_not_applied=True)

    @function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, outcome_check=check)
    async def refund(order: int) -> str:
        """Refund an order."""
        return f"refunded {order}"

    model = ScriptedModelClient(lambda request: ScriptedModelReply(text="Hello"))
    definition = AgentDefinition(name="support", instructions="Help.", model=model, tools=[refund])
    options = stepwise_agent_session_options(definition)
    assert options.outcome_check("refund") is check
    assert options.outcome_check("lookup") is None
