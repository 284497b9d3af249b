"""What ``RunModel`` commits for built-in calls and a planning turn's calls, in its own commit.

:func:`~dex_agents._session.built_in_transitions.settle_requested_calls` decides;
:func:`commit_call_settlements` writes the decisions: the plan of a ``write_todos`` call with
``plan_updated``, an ``ask_user`` interrupt with ``interrupt_raised``, a ``durable_wait`` call's
``timer_started``, and every call that settled at once (invalid arguments, ``write_todos``, a
planning turn's other tools) with its one ``ToolCallResults`` message.
"""

from __future__ import annotations

from collections.abc import Sequence

from dex import AsyncContext

from dex_agents._event_writer import AgentEventWriter, write_event_payload
from dex_agents._events import InterruptRaisedPayload, PlanUpdatedPayload, TimerStartedPayload
from dex_agents._session.built_in_transitions import RequestedCallSettlement
from dex_agents._session.persistence import AGENT_PLAN
from dex_agents._session.records import finish_tool_call
from dex_agents._values import AgentInterrupt, AgentToolCallStatus

__all__ = ["commit_call_settlements"]


def commit_call_settlements(
    context: AsyncContext,
    events: AgentEventWriter,
    settlements: Sequence[RequestedCallSettlement],
) -> list[AgentInterrupt]:
    """Write what the settlements decided, after the records are stored.

    Returns:
        The question interrupts to add to ``PendingInterrupts``.
    """
    interrupts: list[AgentInterrupt] = []
    for settlement in settlements:
        record = settlement.record
        if settlement.plan is not None:
            AGENT_PLAN.set(context, settlement.plan)
            write_event_payload(events, PlanUpdatedPayload.of(settlement.plan))
        if settlement.interrupt is not None:
            interrupts.append(settlement.interrupt)
            write_event_payload(events, InterruptRaisedPayload.of(settlement.interrupt, record))
        if record.status is AgentToolCallStatus.WAITING_FOR_TIMER:
            write_event_payload(events, TimerStartedPayload.of(record))
        if record.is_final:
            finish_tool_call(context, events, record)
    return interrupts
