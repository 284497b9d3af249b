"""A Flow that waits for a person, for SearchFlows tests through the engine.

``TicketFlow`` (Flow type ``"TicketFlow"``, input: a title): ``Open`` sets the indexed Attribute
``status`` (index key ``TicketStatus``) to ``"open"`` and moves to ``AwaitApproval``, which waits
for one message on the Channel ``approvals`` (published by the RPC ``approve``), then sets
``TicketStatus`` to ``"approved"`` and completes.

Registry spec for Worker child processes: ``search_sample_flows:ticket_registry``.
"""

from __future__ import annotations

import dex
from dex import (
    Attribute,
    AttributeIndex,
    Channel,
    Context,
    Flow,
    IndexType,
    PersistenceSchema,
    Registry,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    Wait,
)

TICKET_REGISTRY = "search_sample_flows:ticket_registry"

STATUS = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "TicketStatus"))
APPROVALS = Channel("approvals", str)


class Open(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        STATUS.set(context, "open")
        return dex.go_to(AwaitApproval, input)


class AwaitApproval(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(APPROVALS.for_n(1))

    def execute(self, context: Context, input: str) -> StepDecision:
        STATUS.set(context, "approved")
        return dex.graceful_complete(input)


class TicketFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Open()).other_steps(AwaitApproval())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(STATUS, APPROVALS)

    @dex.rpc
    def approve(self, context: Context, by: str) -> RPCResult[None]:
        APPROVALS.publish(context, by)
        return RPCResult(None)


def ticket_registry() -> Registry:
    return Registry([TicketFlow()])
