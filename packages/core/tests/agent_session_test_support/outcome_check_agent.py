"""The session Flow of the outcome check tests: five single-attempt payments, each with its own
check, run in parallel in one Worker child that the test SIGKILLs while every call waits at its
gate.

The state directory comes from ``AGENT_SESSION_TEST_STATE_DIR`` (shared with ``crash_agent``).
A payment takes effect by writing its idempotency key to the ledger (``ledger.log``): before its
gate when the call's ``commit`` is ``before`` (the provider committed, then the Worker died),
after it otherwise. Each check looks the key up in the ledger, the way a payment provider's
lookup by idempotency key would, except the ``unknown`` and ``raises`` tools' checks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolExecution,
    ToolEffect,
    ToolExecutionResult,
    ToolOutcomeCheck,
    ToolOutcomeCheckRequest,
    ToolOutcomeCheckResult,
    ToolPolicy,
)
from dex_agents.testing import FileGate, InvocationLog

from agent_session_test_support import (
    ScriptedRunner,
    final_answer_with_results,
    request_tools,
    tool_call,
)
from agent_session_test_support.crash_agent import STATE_DIR_ENV

OUTCOME_CHECK_FLOW_TYPE = "OutcomeCheckTestAgent"
FINAL_MODEL_GATE = "final-model"
LEDGER = "ledger"
CHECK_FAILURE = "the payment provider's lookup is down"

#: tool call ID -> (tool, gate, commit): the five calls of the turn.
CALLS: dict[str, tuple[str, str, str]] = {
    "c-applied": ("pay", "applied", "before"),
    "c-not-applied": ("pay", "not-applied", "after"),
    "c-again": ("pay_again", "again", "after"),
    "c-unknown": ("pay_unsure", "unknown", "before"),
    "c-raises": ("pay_check_down", "raises", "before"),
}


def state_dir() -> Path:
    return Path(os.environ[STATE_DIR_ENV])


def log() -> InvocationLog:
    """Every payment run (by tool name), check run (``check:<tool>``), and ledger write."""
    return InvocationLog(state_dir() / "outcome-check.log")


def _paid(order: int) -> str:
    return f"paid order {order}"


async def _pay(call: DeferredToolExecution) -> ToolExecutionResult:
    arguments = json.loads(call.tool_call.arguments)
    log().record(call.tool_call.tool_name, key=call.idempotency_key)
    if arguments["commit"] == "before":
        log().record(LEDGER, key=call.idempotency_key)
    gate = FileGate(state_dir(), arguments["gate"])
    gate.mark_reached()
    await gate.wait_for_release()
    if arguments["commit"] != "before":
        log().record(LEDGER, key=call.idempotency_key)
    return ToolExecutionResult(_paid(arguments["order"]))


async def _look_up(request: ToolOutcomeCheckRequest) -> ToolOutcomeCheckResult:
    log().record(f"check:{request.tool_name}", key=request.idempotency_key)
    if request.idempotency_key in log().keys(LEDGER):
        return ToolOutcomeCheckResult.applied(_paid(int(str(request.argument_values()["order"]))))
    return ToolOutcomeCheckResult.not_applied("no payment with this key")


def _cannot_tell(request: ToolOutcomeCheckRequest) -> ToolOutcomeCheckResult:
    # A sync check: it runs in a worker thread.
    log().record(f"check:{request.tool_name}", key=request.idempotency_key)
    return ToolOutcomeCheckResult.unknown("the provider has no lookup for this payment")


async def _lookup_down(request: ToolOutcomeCheckRequest) -> ToolOutcomeCheckResult:
    log().record(f"check:{request.tool_name}", key=request.idempotency_key)
    raise RuntimeError(CHECK_FAILURE)


def _script(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        return request_tools(
            turn,
            *(
                tool_call(turn, call_id, tool, {"order": 7, "gate": gate, "commit": commit})
                for call_id, (tool, gate, commit) in CALLS.items()
            ),
        )
    return final_answer_with_results(turn)


async def _before_model_call(turn: AgentTurnContext) -> None:
    if turn.is_resuming:
        # The test reads the snapshot's final records here, before the turn clears them.
        gate = FileGate(state_dir(), FINAL_MODEL_GATE)
        gate.mark_reached()
        await gate.wait_for_release()


def _write(check: ToolOutcomeCheck) -> ToolPolicy:
    return ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False, outcome_check=check)


def build_outcome_check_flow() -> AgentSessionFlow:
    """The Flow both the test's Client and the Worker children register."""
    options = AgentSessionOptions(
        tool_policies={
            "pay": _write(ToolOutcomeCheck(_look_up)),
            "pay_again": _write(ToolOutcomeCheck(_look_up, run_again_if_not_applied=True)),
            "pay_unsure": _write(ToolOutcomeCheck(_cannot_tell)),
            "pay_check_down": _write(ToolOutcomeCheck(_lookup_down)),
        }
    )
    tools = {tool: _pay for tool, _, _ in CALLS.values()}
    runner = ScriptedRunner(_script, tools, before_model_call=_before_model_call)
    return AgentSessionFlow(runner, flow_type=OUTCOME_CHECK_FLOW_TYPE, options=options)
