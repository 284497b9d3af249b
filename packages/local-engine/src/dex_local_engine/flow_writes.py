"""Writes to a Flow run's Attributes and Channels, from Clients, Steps and RPCs.

Example::

    apply_attribute_writes(run, request.attributes)
    published = publish(run, request.messages)
"""

from __future__ import annotations

from collections.abc import Iterable

from dex.dexpb import dex_pb2 as pb

from dex_local_engine import errors
from dex_local_engine.flow_state import FlowRun
from dex_local_engine.wire_values import ensure_value, is_null

__all__ = [
    "apply_attribute_writes",
    "apply_method_writes",
    "delete_messages",
    "publish",
    "require_pending",
]


def apply_attribute_writes(run: FlowRun, writes: Iterable[pb.AttributeWrite]) -> None:
    """Set (or, for null, delete) each Attribute and record requested indexes.

    Raises:
        EngineError: INVALID_ARGUMENT for a write with an empty key.
    """
    for write in writes:
        if not write.key:
            raise errors.invalid_argument("an Attribute write has an empty key")
        if is_null(write.value):
            run.attributes.pop(write.key, None)
        else:
            run.attributes[write.key] = ensure_value(write.value)
        if write.HasField("index_config") and write.index_config.enable:
            run.attribute_indexes[write.key] = write.index_config


def publish(run: FlowRun, messages: Iterable[pb.ChannelMessage]) -> list[pb.ChannelMessage]:
    """Append ``messages`` to their Channels (assigning message IDs); returns them as stored.

    Raises:
        EngineError: INVALID_ARGUMENT for a message without a Channel name.
    """
    published = []
    for message in messages:
        if not message.channel_name:
            raise errors.invalid_argument("a Channel message has an empty channel_name")
        stored = pb.ChannelMessage(
            channel_name=message.channel_name,
            value=ensure_value(message.value),
            message_id=message.message_id or f"msg-{run.next_message_number}",
        )
        run.next_message_number += 1
        run.channels.setdefault(stored.channel_name, []).append(stored)
        published.append(stored)
    return published


def require_pending(run: FlowRun, deletions: Iterable[pb.ChannelMessageDeletion]) -> None:
    """Raise the ChannelMessageNotFound error for the first deletion of a missing message."""
    pending = {(name, m.message_id) for name, queue in run.channels.items() for m in queue}
    for deletion in deletions:
        key = (deletion.channel_name, deletion.message_id)
        if key not in pending:
            raise errors.channel_message_not_found(*key)
        pending.discard(key)


def delete_messages(
    run: FlowRun, deletions: Iterable[pb.ChannelMessageDeletion], *, strict: bool
) -> None:
    """Remove pending messages; a missing one raises when ``strict``, else it is skipped.

    Raises:
        EngineError: NOT_FOUND (ChannelMessageNotFound) for a missing message when ``strict``.
    """
    for deletion in deletions:
        queue = run.channels.get(deletion.channel_name, [])
        index = next((i for i, m in enumerate(queue) if m.message_id == deletion.message_id), None)
        if index is None:
            if strict:
                raise errors.channel_message_not_found(deletion.channel_name, deletion.message_id)
            # A non-transactional RPC deletes best-effort (a transactional one was checked).
            continue
        del queue[index]
        if not queue:
            run.channels.pop(deletion.channel_name, None)


def apply_method_writes(
    run: FlowRun,
    attributes: Iterable[pb.AttributeWrite],
    publications: Iterable[pb.ChannelMessage],
    deletions: Iterable[pb.ChannelMessageDeletion],
) -> None:
    """Apply a Step's or RPC's writes: Attributes, then deletions (best effort), then publishes."""
    apply_attribute_writes(run, attributes)
    delete_messages(run, deletions, strict=False)
    publish(run, publications)
