"""Plan mode in the session Flow: the approval ``AwaitUserMessage`` waits for, and the executing
turn it starts.

``execute_plan`` records an approval in ``PendingPlanExecution`` and publishes it to the
``PlanExecutions`` instance of its revision. ``AwaitUserMessage`` waits on the instance of the
current revision only, after queued messages, so an approval of a revision that a later turn
replaced never runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from dex import AsyncContext, Context, StepDecision
from dex.condition import Condition

from dex_agents._event_writer import write_event_payload
from dex_agents._events import PlanExecutionStartedPayload, PlanUpdatedPayload
from dex_agents._plans import (
    PlanExecutionState,
    accepts_plan_execution,
    approve_plan,
    is_current_plan_approval,
    plan_execution_key,
    plan_execution_message,
)
from dex_agents._session.persistence import (
    AGENT_PLAN,
    AGENT_STATE,
    PENDING_INTERRUPTS,
    PENDING_PLAN_EXECUTION,
    PLAN_EXECUTIONS,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
)
from dex_agents._session.runtime import SessionRuntime
from dex_agents._session.turns import begin_turn
from dex_agents._values import (
    AgentPlan,
    AgentState,
    ExecutePlanRequest,
    InteractionMode,
    PlanExecutionRequest,
    PlanStatus,
)

__all__ = [
    "PlanApproval",
    "accept_plan_execution",
    "plan_approval_condition",
    "start_executing_turn",
    "take_plan_approval",
]


def plan_approval_condition(context: Context) -> Condition | None:
    """Return the wait for an approval of the current plan revision, while it is draft or active."""
    plan = AGENT_PLAN.get(context)
    if plan is None or plan.status not in (PlanStatus.DRAFT, PlanStatus.ACTIVE):
        return None
    return PLAN_EXECUTIONS.for_one(plan_execution_key(plan.revision))


@dataclass(frozen=True)
class PlanApproval:
    """An approval ``AwaitUserMessage`` consumed: the plan before it, and whether it still applies."""

    request: PlanExecutionRequest
    plan: AgentPlan | None

    @property
    def is_current(self) -> bool:
        """Whether the approval names the plan's revision, which is draft or active."""
        return is_current_plan_approval(self.request, self.plan)


def take_plan_approval(context: AsyncContext) -> PlanApproval | None:
    """Return the approval this execution consumed, clearing ``PendingPlanExecution``, or ``None``."""
    plan = AGENT_PLAN.get(context)
    if plan is None:
        return None
    approvals = PLAN_EXECUTIONS.results(context, plan_execution_key(plan.revision))
    if not approvals:
        return None
    PENDING_PLAN_EXECUTION.delete(context)
    return PlanApproval(approvals[0], plan)


def start_executing_turn(
    context: AsyncContext, runtime: SessionRuntime, state: AgentState, approval: PlanApproval
) -> StepDecision:
    """Mark the approved plan active, write ``plan_execution_started``, and start the executing
    turn with ``[Dex] The user approved plan revision <n>. ...`` as its user message."""
    plan = approval.plan
    assert plan is not None
    active = approve_plan(plan, updated_at=runtime.now())
    AGENT_PLAN.set(context, active)
    decision = begin_turn(
        context,
        runtime,
        state,
        plan_execution_message(plan.revision),
        interaction_mode=InteractionMode.EXECUTING,
    )
    turn_id = (AGENT_STATE.get(context) or state).active_turn_id
    events = runtime.event_writer(context, turn_id)
    if plan.status is not PlanStatus.ACTIVE:
        write_event_payload(events, PlanUpdatedPayload.of(active))
    write_event_payload(events, PlanExecutionStartedPayload(revision=plan.revision))
    return decision


def accept_plan_execution(context: Context, request: ExecutePlanRequest) -> bool:
    """Decide and commit one ``execute_plan`` call; the RPC holds the ``PendingPlanExecution`` lock
    and loads the queued and steered message Channels.

    Returns:
        ``True`` when the approval was recorded and published.
    """
    state = AGENT_STATE.get(context) or AgentState()
    plan = AGENT_PLAN.get(context)
    pending: PlanExecutionRequest | None = PENDING_PLAN_EXECUTION.get(context)
    if pending is not None and (plan is None or pending.revision != plan.revision):
        # AwaitUserMessage waits on the current revision only, so this one never runs.
        pending = None
    decision_state = PlanExecutionState(
        status=state.status,
        active_turn_id=state.active_turn_id,
        plan=plan,
        pending_plan_execution=pending,
        queued_message_count=len(QUEUED_USER_MESSAGES.pending_messages(context)),
        steered_message_count=len(STEERED_USER_MESSAGES.pending_messages(context)),
        pending_interrupt_count=len(PENDING_INTERRUPTS.get(context) or []),
    )
    if not accepts_plan_execution(request, decision_state):
        return False
    approval = PlanExecutionRequest(revision=request.revision)
    PENDING_PLAN_EXECUTION.set(context, approval)
    PLAN_EXECUTIONS.publish(context, plan_execution_key(request.revision), approval)
    return True
