"""The agents ``dex-agents worker`` serves in its tests: import paths for a Worker process.

``flows`` is a list, ``build_flows`` a factory, ``support_flow`` one Flow, and ``not_a_flow`` a
string. The tools stop at a ``FileGate`` in ``$WORKER_TEST_GATES`` (``lookup`` for the read,
``refund`` for the write) until the test releases it. Asked about frozen objects, the model
answers with the Worker process's ``gc.get_freeze_count()``.
"""

from __future__ import annotations

import gc
import os

from dex_agents import AgentSessionFlow, ToolEffect
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    function_tool,
    stepwise_agent_session_flow,
)
from dex_agents.testing import FileGate

GATES_ENV = "WORKER_TEST_GATES"


async def _pass_gate(name: str) -> None:
    gate = FileGate(os.environ[GATES_ENV], name)
    gate.mark_reached()
    await gate.wait_for_release()


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> str:
    """Look up an order (waits at the ``lookup`` gate)."""
    await _pass_gate("lookup")
    return f"order {order_id} was delivered"


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
async def refund_order(order_id: str) -> str:
    """Refund an order (waits at the ``refund`` gate)."""
    await _pass_gate("refund")
    return f"refunded order {order_id}"


def _reply(request: ModelRequest) -> ScriptedModelReply:
    text = ScriptedModelClient.user_texts(request)[-1]
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text=f"Done: {results[-1].output}")
    if "frozen" in text:
        return ScriptedModelReply(text=f"Frozen objects: {gc.get_freeze_count()}")
    if "refund" in text:
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("refund_order", {"order_id": "7"})])
    if "order" in text:
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"})])
    return ScriptedModelReply(text=f"You said: {text}")


def _flow(flow_type: str) -> AgentSessionFlow:
    agent = AgentDefinition(
        name="support",
        instructions="You help with orders.",
        model=ScriptedModelClient(_reply),
        tools=[lookup_order, refund_order],
    )
    return stepwise_agent_session_flow(agent, flow_type=flow_type)


support_flow = _flow("WorkerSupportAgent")
other_flow = _flow("WorkerOtherAgent")
flows = [support_flow, other_flow]
not_a_flow = "a string"


def build_flows() -> list[AgentSessionFlow]:
    """A factory: the same two Flows."""
    return flows
