"""The outcome check of the scenario payments, and the tool policies that declare it.

``pay`` and ``pay_again`` write their idempotency key to the ledger (``LEDGER_INVOCATION``) when
they take effect. Their check, like a payment provider's lookup by idempotency key, answers
*applied* (with the output the tool returns) when the key is there and *not applied* when it is
not; a call whose gate starts with ``unknown`` gets *unknown*, and one whose gate starts with
``raises`` a check that raises on every attempt. Every check run is logged as
``check:<tool>`` with the call's key.
"""

from __future__ import annotations

from typing import Final

from dex_agents import (
    ToolOutcomeCheck,
    ToolOutcomeCheckRequest,
    ToolOutcomeCheckResult,
    ToolPolicy,
)
from dex_agents.testing.scenarios._scenario_agent import (
    LEDGER_INVOCATION,
    ScenarioAgentSpec,
    ScenarioTool,
    ScenarioToolError,
    scenario_session,
    scenario_tool_output,
)

__all__ = [
    "CHECK_RAISES_GATE_PREFIX",
    "CHECK_UNKNOWN_GATE_PREFIX",
    "SCENARIO_CHECK_FAILURE",
    "SCENARIO_CHECK_UNKNOWN",
    "SCENARIO_NOT_APPLIED",
    "outcome_check_invocation",
    "scenario_outcome_check",
    "scenario_tool_policies",
    "scenario_tool_policy",
]

CHECK_UNKNOWN_GATE_PREFIX: Final = "unknown"
"""A payment whose gate starts with this gets a check that answers *unknown*."""
CHECK_RAISES_GATE_PREFIX: Final = "raises"
"""A payment whose gate starts with this gets a check that raises on every attempt."""
SCENARIO_CHECK_UNKNOWN: Final = "the scenario ledger cannot tell"
"""The note of an *unknown* answer."""
SCENARIO_CHECK_FAILURE: Final = "the scenario ledger is down"
"""What a raising check raises (as ``ScenarioToolError``)."""
SCENARIO_NOT_APPLIED: Final = "no payment with this key in the scenario ledger"
"""The note of a *not applied* answer."""


def outcome_check_invocation(tool: str) -> str:
    """The InvocationLog name of ``tool``'s outcome check runs."""
    return f"check:{tool}"


def scenario_outcome_check(spec: ScenarioAgentSpec, tool: ScenarioTool) -> ToolOutcomeCheck | None:
    """``tool``'s outcome check, bound to ``spec``'s state, or ``None`` when it declares none."""
    if not tool.outcome_check:
        return None

    async def check(request: ToolOutcomeCheckRequest) -> ToolOutcomeCheckResult:
        # The check runs in CheckToolOutcome, outside any tool call: name the session.
        with scenario_session(request.flow_id):
            return _look_up(spec, request)

    return ToolOutcomeCheck(check, run_again_if_not_applied=tool.run_again_if_not_applied)


def _look_up(spec: ScenarioAgentSpec, request: ToolOutcomeCheckRequest) -> ToolOutcomeCheckResult:
    log = spec.invocation_log
    log.record(outcome_check_invocation(request.tool_name), key=request.idempotency_key)
    gate = str(request.argument_values().get("gate", ""))
    if gate.startswith(CHECK_UNKNOWN_GATE_PREFIX):
        return ToolOutcomeCheckResult.unknown(SCENARIO_CHECK_UNKNOWN)
    if gate.startswith(CHECK_RAISES_GATE_PREFIX):
        raise ScenarioToolError(SCENARIO_CHECK_FAILURE)
    if request.idempotency_key in log.keys(LEDGER_INVOCATION):
        return ToolOutcomeCheckResult.applied(scenario_tool_output(request.tool_name, gate))
    return ToolOutcomeCheckResult.not_applied(SCENARIO_NOT_APPLIED)


def scenario_tool_policy(spec: ScenarioAgentSpec, tool: ScenarioTool) -> ToolPolicy:
    """``tool``'s effect, approval and outcome check as a ToolPolicy."""
    return ToolPolicy(tool.effect, tool.requires_approval, scenario_outcome_check(spec, tool))


def scenario_tool_policies(spec: ScenarioAgentSpec) -> dict[str, ToolPolicy]:
    """The ToolPolicy of every tool of ``spec``, by name: what a runner passes as
    ``AgentSessionOptions.tool_policies`` (the outcome checks need it)."""
    return {tool.name: scenario_tool_policy(spec, tool) for tool in spec.tools}
