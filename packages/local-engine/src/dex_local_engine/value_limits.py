"""Size limits on values and Worker tasks.

Every SDK channel keeps gRPC's default 4 MiB receive limit. Tasks stay under it because large
values travel as blob references (:mod:`dex_local_engine.blob_values`), but ``LoadBlobs`` returns
each value whole, so a single value larger than about 4 MiB could never reach a Worker or a
Client. The per-value limit therefore stays just under 4 MiB (it cannot be raised to the 8 or
16 MiB a real Dex Server's ``values.maxValueBytes`` may allow). The engine refuses a larger value
where it enters (a Client request, a Step result, an RPC result) with an error naming the value
and its size, instead of storing something no Worker could load later.
"""

from __future__ import annotations

from collections.abc import Iterable

from dex.dexpb import dex_pb2 as pb

__all__ = [
    "MAX_TASK_BYTES",
    "MAX_VALUE_BYTES",
    "TOO_LARGE_ERROR_TYPE",
    "oversized_task",
    "oversized_values",
]

MAX_TASK_BYTES = 4 * 1024 * 1024 - 16 * 1024
"""Largest serialized task the engine sends to a Worker (the SDK receives at most 4 MiB)."""

MAX_VALUE_BYTES = MAX_TASK_BYTES - 64 * 1024
"""Largest serialized single value (Attribute, Channel message, Step input or output):
4,112,384 bytes, so one value plus its ``LoadBlobs`` framing fits a 4 MiB SDK response."""

TOO_LARGE_ERROR_TYPE = "dex_local_engine.ValueTooLarge"
"""``error_type`` of a Step failure caused by an oversized value or task."""


def _first_oversized(named: Iterable[tuple[str, pb.Value]]) -> str | None:
    for name, value in named:
        size = value.ByteSize()
        if size > MAX_VALUE_BYTES:
            return f"{name} is {size} bytes, over the {MAX_VALUE_BYTES}-byte value limit"
    return None


def _decision_values(decision: pb.StepDecision) -> list[tuple[str, pb.Value]]:
    named = [
        (f"the input of Step movement {movement.step_type!r}", movement.step_input)
        for movement in decision.next_steps
    ]
    if decision.close_decision.HasField("close_input"):
        named.append(("the Flow close output", decision.close_decision.close_input))
    return named


def oversized_values(
    *,
    attributes: Iterable[pb.AttributeWrite] = (),
    messages: Iterable[pb.ChannelMessage] = (),
    decision: pb.StepDecision | None = None,
    others: Iterable[tuple[str, pb.Value]] = (),
) -> str | None:
    """A sentence naming the first value over :data:`MAX_VALUE_BYTES`, or None.

    Example::

        problem = oversized_values(attributes=request.attributes)
    """
    named = [(f"Attribute {write.key!r}", write.value) for write in attributes]
    named += [(f"a message of Channel {m.channel_name!r}", m.value) for m in messages]
    if decision is not None:
        named += _decision_values(decision)
    named += list(others)
    return _first_oversized(named)


def oversized_task(size: int, what: str) -> str | None:
    """A sentence when a task of ``size`` serialized bytes exceeds :data:`MAX_TASK_BYTES`, else
    None."""
    if size <= MAX_TASK_BYTES:
        return None
    return (
        f"the task for {what} is {size} bytes, over the {MAX_TASK_BYTES}-byte limit a Worker "
        "can receive; load fewer AttributeMap instances or Channel messages"
    )
