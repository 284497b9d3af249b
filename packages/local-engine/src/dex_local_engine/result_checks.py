"""Checks of what Workers and Clients send: malformed writes and oversized values.

A result that fails a check is refused as a whole, so nothing of it is applied.
"""

from __future__ import annotations

from collections.abc import Callable

from dex.dexpb import dex_pb2 as pb

from dex_local_engine import errors
from dex_local_engine.field_checks import BlobReferences, field_problem
from dex_local_engine.value_limits import oversized_values

__all__ = [
    "MALFORMED_RESULT_ERROR_TYPE",
    "has_effects",
    "malformed_result",
    "malformed_rpc_result",
    "oversized_result",
    "refuse_oversized",
]


MALFORMED_RESULT_ERROR_TYPE = "dex_local_engine.MalformedResult"
"""``error_type`` of a Step method failure caused by a Worker result the engine refused."""


def malformed_result(
    response: pb.InvokeWaitForMethodResponse | pb.InvokeExecuteMethodResponse,
    is_known_blob: Callable[[str], bool],
) -> str | None:
    """Why a Step method result cannot be applied, or None."""
    problem = field_problem(response, BlobReferences.KNOWN, is_known_blob)
    return None if problem is None else f"the Worker returned a malformed result: {problem}"


def malformed_rpc_result(
    response: pb.InvokeWorkerRPCResponse, is_known_blob: Callable[[str], bool]
) -> str | None:
    """Why an RPC result cannot be applied, or None."""
    return field_problem(response, BlobReferences.KNOWN, is_known_blob)


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
