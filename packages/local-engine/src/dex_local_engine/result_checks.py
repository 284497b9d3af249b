"""Checks of what Workers and Clients send: malformed writes and oversized values.

A result that fails a check is refused as a whole, so nothing of it is applied.
"""

from __future__ import annotations

from collections.abc import Iterable

from dex.dexpb import dex_pb2 as pb

from dex_local_engine import errors
from dex_local_engine.value_limits import oversized_values

__all__ = [
    "has_effects",
    "malformed_result",
    "malformed_writes",
    "oversized_result",
    "refuse_oversized",
]


def malformed_writes(
    attributes: Iterable[pb.AttributeWrite],
    messages: Iterable[pb.ChannelMessage],
    decision: pb.StepDecision | None,
) -> str | None:
    """A sentence naming the first malformed write or movement, or None."""
    if any(not write.key for write in attributes):
        return "the result writes an Attribute with an empty key"
    if any(not message.channel_name for message in messages):
        return "the result publishes a Channel message with an empty channel name"
    if decision is not None and any(not m.step_type for m in decision.next_steps):
        return "the result moves to a Step with an empty Step type"
    return None


def malformed_result(
    response: pb.InvokeWaitForMethodResponse | pb.InvokeExecuteMethodResponse,
) -> str | None:
    """Why a Step method result cannot be applied, or None."""
    decision = (
        response.step_decision if isinstance(response, pb.InvokeExecuteMethodResponse) else None
    )
    problem = malformed_writes(response.upsert_attributes, response.publish_to_channel, decision)
    return None if problem is None else f"the Worker returned a malformed result: {problem}"


def refuse_oversized(problem: str | None) -> None:
    """Raise INVALID_ARGUMENT naming ``problem`` when there is one."""
    if problem is not None:
        raise errors.invalid_argument(problem)


def oversized_result(
    response: pb.InvokeWaitForMethodResponse | pb.InvokeExecuteMethodResponse,
) -> str | None:
    """A sentence naming the first oversized value of a Step method result, or None."""
    locals_ = [
        (f"step-execution local {kv.key!r}", kv.value) for kv in response.upsert_step_exe_locals
    ]
    decision = (
        response.step_decision if isinstance(response, pb.InvokeExecuteMethodResponse) else None
    )
    return oversized_values(
        attributes=response.upsert_attributes,
        messages=response.publish_to_channel,
        decision=decision,
        others=locals_,
    )


def has_effects(response: pb.InvokeWorkerRPCResponse) -> bool:
    """Whether an RPC result changes the Flow (writes, publishes, deletes, Step movements)."""
    decision = response.step_decision
    return bool(
        response.upsert_attributes
        or response.publish_to_channel
        or response.delete_from_channel
        or decision.next_steps
        or decision.cancel_step_types
    )
