"""Where the session's messages live: every read and write of stored messages goes through here.

The newest messages are the window: one ``AgentMessages`` instance per message, keyed by
``message_sequence_key(sequence)``. When the window outgrows ``message_window_size``, its oldest
messages move into immutable ``AgentMessageChunks`` instances in the same commit, listed in the
``AgentMessageIndex`` Attribute; with compaction, retention deletes the oldest chunks once the
summary covers them. The pure planning lives in :mod:`dex_agents._session.message_layout`; this module
applies it through a Dex Context. A session without an index (stored by dex-agents 0.1.0) reads as
one large window, which each storing Step shrinks by at most 4 chunks.

What each invocation must load:

- A Step that stores messages loads the whole window (every ``AgentMessages`` instance); it never
  needs a chunk, because it only writes new chunks and deletes old ones.
- A Step or RPC that reads messages also loads the chunks it reads: every kept chunk
  (``AGENT_MESSAGE_CHUNKS`` in full), or, for ``RunModel`` with compaction, only the chunks after the
  summary, through per-movement options from :func:`message_chunk_loads`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

from dex import AttributeMapLoad, Context

from dex_agents._session.message_decode_cache import MessageDecodeCache
from dex_agents._session.message_layout import (
    AgentMessageChunk,
    AgentMessageIndex,
    MessageLayoutError,
    MessageStorageLimits,
    StoragePlan,
    assemble_stored_messages,
    chunks_to_load,
    deleted_before_sequence,
    page_agent_messages,
    plan_message_storage,
)
from dex_agents._session.persistence import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGE_INDEX,
    AGENT_MESSAGES,
    CONTEXT_SUMMARY,
)
from dex_agents._session.size_budgets import fit_message_page
from dex_agents._text_validity import replace_unencodable_values
from dex_agents._tool_outcome_check import ToolOutcomeCheckStatus
from dex_agents._values import (
    AgentMessage,
    AgentMessagesPage,
    AgentState,
    FrameworkMessage,
    MessageRole,
    message_sequence_key,
)

__all__ = [
    "StoredMessages",
    "append_messages",
    "load_messages",
    "load_newest_messages",
    "load_stored_messages",
    "message_chunk_loads",
    "page_messages",
]

_logger: Final = logging.getLogger("dex_agents.session")
_DEFAULT_LIMITS: Final = MessageStorageLimits()
# A sequence above every stored one: read the whole window as placeholders.
_NEVER: Final = 2**62


@dataclass(frozen=True)
class StoredMessages:
    """The messages an invocation read, with the index they were read through.

    Attributes:
        messages: The stored messages read, oldest first.
        index: The ``AgentMessageIndex`` value, ``None`` before the session wrote a chunk.
    """

    messages: tuple[AgentMessage, ...]
    index: AgentMessageIndex | None

    @property
    def deleted_before_sequence(self) -> int | None:
        """Where retention's deleted messages end, or ``None`` when nothing was deleted."""
        return deleted_before_sequence(self.index)


def load_stored_messages(
    context: Context,
    *,
    after_sequence: int | None = None,
    cache: MessageDecodeCache | None = None,
) -> StoredMessages:
    """Read the stored messages after ``after_sequence`` (every kept message with ``None``).

    The invocation must load every ``AgentMessages`` instance and every chunk that
    :func:`message_chunk_loads` names for the same ``after_sequence``.

    Args:
        context: The Step or RPC Context.
        after_sequence: Leave out the messages up to this sequence, such as the summarized ones.
        cache: The Flow's decoded-message cache, only for an invocation that has not written
            messages yet (see :mod:`dex_agents._session.message_decode_cache`).

    Returns:
        The messages, oldest first, and the index.

    Raises:
        AttributeMapNotLoadedError: When the invocation did not load the window or a needed chunk.
        MessageLayoutError: When a needed chunk is missing or the stored sequences have a gap.
    """
    window = _read_window(context, decode_after=after_sequence, cache=cache)
    index = AGENT_MESSAGE_INDEX.get(context)
    chunks = _read_chunks(context, index, after_sequence=after_sequence, cache=cache)
    messages = assemble_stored_messages(window, index, chunks, after_sequence=after_sequence)
    return StoredMessages(messages, index)


def load_newest_messages(
    context: Context,
    newest_sequence: int,
    limit: int,
    *,
    cache: MessageDecodeCache | None = None,
) -> StoredMessages:
    """Read at most the ``limit`` newest stored messages, decoding only those.

    Stored sequences have no gap, so the newest ``limit`` messages are the ones after
    ``newest_sequence - limit``; reading only them keeps ``get_agent_snapshot`` from decoding the
    whole history. The invocation loads what :func:`load_stored_messages` needs.

    Args:
        context: The Step or RPC Context.
        newest_sequence: ``AgentState.last_message_sequence`` as committed (0 before any message).
        limit: How many of the newest messages to return.
        cache: As for :func:`load_stored_messages`.

    Raises:
        AttributeMapNotLoadedError: When the invocation did not load the window or a needed chunk.
        MessageLayoutError: When a needed chunk is missing or the stored sequences have a gap.
    """
    # A window message newer than the state's sequence would be a defect elsewhere; counting it
    # keeps the result equal to the newest ``limit`` of every stored message even then.
    newest = max(
        [newest_sequence, *(int(key) for key in AGENT_MESSAGES.get_all_instance_keys(context))]
    )
    after_sequence = newest - limit if newest > limit else None
    stored = load_stored_messages(context, after_sequence=after_sequence, cache=cache)
    return StoredMessages(stored.messages[-limit:], stored.index)


def load_messages(
    context: Context,
    *,
    after_sequence: int | None = None,
    cache: MessageDecodeCache | None = None,
) -> list[AgentMessage]:
    """Return the stored messages after ``after_sequence`` in ascending sequence order.

    See :func:`load_stored_messages` for what the invocation must load and when to pass ``cache``.

    Raises:
        AttributeMapNotLoadedError: When the invocation did not load the messages.
        MessageLayoutError: When the stored sequences have a gap or a duplicate.
    """
    return list(load_stored_messages(context, after_sequence=after_sequence, cache=cache).messages)


def message_chunk_loads(
    context: Context, *, after_sequence: int | None
) -> tuple[AttributeMapLoad, ...]:
    """Return the ``AgentMessageChunks`` loads of a movement that reads messages after
    ``after_sequence``, from the index as this Step commits it.
    """
    index = AGENT_MESSAGE_INDEX.get(context)
    return tuple(
        AGENT_MESSAGE_CHUNKS.load(entry.key)
        for entry in chunks_to_load(index, after_sequence=after_sequence)
    )


def append_messages(
    context: Context,
    state: AgentState,
    messages: Sequence[FrameworkMessage],
    *,
    turn_id: str | None,
    now: datetime,
    limits: MessageStorageLimits | None = None,
    outcome_checks: Mapping[str, ToolOutcomeCheckStatus] | None = None,
) -> tuple[AgentState, list[AgentMessage]]:
    """Store ``messages`` after the newest stored message, in this Step's commit.

    Also moves the window's oldest messages into chunks (at most 4 chunks and 8 MiB per commit), and
    with retention (``limits.retained_message_limit`` set) and a ``ContextSummary`` deletes the
    oldest chunks the summary covers. A message too large for a chunk of its own limit goes straight
    into its own chunk, so a message too large for the Server fails this commit. The invocation must
    load every ``AgentMessages`` instance; it needs no chunk.

    Args:
        context: The Step Context.
        state: The session state as this Step will commit it, apart from the sequence.
        messages: The messages to store, in order (possibly none: the layout still rolls over).
        turn_id: The turn that stores them.
        now: The store time recorded on each message.
        limits: The session's storage limits (``AgentSessionOptions.message_storage_limits``).
        outcome_checks: Checked outcomes by tool call ID, recorded on those calls' results.

    Returns:
        The state with ``last_message_sequence`` advanced, and the stored messages.

    Raises:
        AttributeMapNotLoadedError: When the invocation did not load the window.
        MessageLayoutError: When the window does not fit the index or the state's sequence.
    """
    resolved = limits if limits is not None else _DEFAULT_LIMITS
    stored: list[AgentMessage] = []
    sequence = state.last_message_sequence
    for message in messages:
        sequence += 1
        stored.append(
            AgentMessage.from_framework_message(
                message,
                sequence=sequence,
                turn_id=turn_id,
                created_at=now,
                outcome_check=_outcome_check_of(message, outcome_checks or {}),
            )
        )
    keys = AGENT_MESSAGES.get_all_instance_keys(context)
    # Only a rollover moves window messages; without one the plan needs their sequences alone.
    rolls_over = len(keys) + len(stored) > resolved.message_window_size
    window = _read_window(context, keys=keys, decode_after=None if rolls_over else _NEVER)
    summary = CONTEXT_SUMMARY.get(context) if resolved.retained_message_limit is not None else None
    plan = plan_message_storage(
        window,
        AGENT_MESSAGE_INDEX.get(context),
        resolved,
        new_messages=stored,
        summary_last_sequence=summary.last_sequence if summary is not None else None,
    )
    _apply(context, plan)
    return replace(state, last_message_sequence=sequence), stored


def _outcome_check_of(
    message: FrameworkMessage, outcome_checks: Mapping[str, ToolOutcomeCheckStatus]
) -> ToolOutcomeCheckStatus | None:
    # Only the result carries it: the model's request of the same call was made before the loss.
    if message.tool_call_id is None or message.tool_output is None:
        return None
    return outcome_checks.get(message.tool_call_id)


def page_messages(
    context: Context,
    after_sequence: int | None,
    limit: int,
    *,
    cache: MessageDecodeCache | None = None,
) -> AgentMessagesPage:
    """Return one ``list_agent_messages`` page, oldest first, after ``after_sequence``.

    The invocation must load every ``AgentMessages`` and ``AgentMessageChunks`` instance. Only the
    messages after ``after_sequence`` are decoded (a client reading a turn's messages pays for
    them, not for the session's history).

    Args:
        context: The RPC Context.
        after_sequence: Start after this sequence; ``None`` starts at the oldest stored message.
        limit: Page size; clamped to 1..200.
        cache: As for :func:`load_stored_messages`.

    Returns:
        The page, with ``next_after_sequence`` set when more messages follow and
        ``deleted_before_sequence`` set once retention deleted messages. It holds fewer than
        ``limit`` messages when more would pass ``MAX_RPC_OUTPUT_BYTES`` (at least one, cut when
        it does not fit alone), and lone surrogates of a session stored before they were refused
        read as U+FFFD.
    """
    stored = load_stored_messages(context, after_sequence=after_sequence, cache=cache)
    page = page_agent_messages(
        stored.messages, stored.index, after_sequence=after_sequence, limit=limit
    )
    # Whatever was stored, the page stays under the RPC limit.
    return fit_message_page(page)


def _read_window(
    context: Context,
    *,
    decode_after: int | None,
    keys: Sequence[str] | None = None,
    cache: MessageDecodeCache | None = None,
) -> list[AgentMessage]:
    """The window's messages; those up to ``decode_after`` only as sequence placeholders.

    Decoding a stored message is the costly part of reading, and a placeholder is enough where
    only its sequence matters: messages a reader leaves out, or a commit that moves none. With
    ``cache``, a message an earlier invocation of this run decoded is not decoded again.
    """
    window_keys = keys if keys is not None else AGENT_MESSAGES.get_all_instance_keys(context)
    placeholders: list[AgentMessage] = []
    wanted: list[str] = []
    for key in window_keys:
        sequence = int(key)
        if decode_after is not None and sequence <= decode_after:
            placeholders.append(_placeholder(sequence))
        else:
            wanted.append(key)

    def decode(key: str) -> AgentMessage:
        # A session stored before text was checked may hold a lone surrogate: read it as U+FFFD.
        return replace_unencodable_values(AGENT_MESSAGES.get(context, key))

    if cache is None:
        return [*placeholders, *(decode(key) for key in wanted)]
    decoded = cache.read(
        context.flow_id,
        context.run_id,
        AGENT_MESSAGES.name,
        wanted,
        decode,
        existing_keys=frozenset(window_keys),
    )
    return [*placeholders, *decoded.values()]


def _read_chunks(
    context: Context,
    index: AgentMessageIndex | None,
    *,
    after_sequence: int | None,
    cache: MessageDecodeCache | None,
) -> list[AgentMessageChunk]:
    """The kept chunks that hold a message after ``after_sequence``, oldest first."""

    def decode(key: str) -> AgentMessageChunk:
        chunk = AGENT_MESSAGE_CHUNKS.get(context, key)
        if chunk is None:
            raise MessageLayoutError(
                f"AgentMessageChunks instance {key} listed in AgentMessageIndex is missing"
            )
        return replace_unencodable_values(chunk)

    keys = [entry.key for entry in chunks_to_load(index, after_sequence=after_sequence)]
    if cache is None:
        return [decode(key) for key in keys]
    kept = frozenset(entry.key for entry in chunks_to_load(index))
    decoded = cache.read(
        context.flow_id,
        context.run_id,
        AGENT_MESSAGE_CHUNKS.name,
        keys,
        decode,
        existing_keys=kept,
        weigh=lambda chunk: len(chunk.messages),
    )
    return list(decoded.values())


@functools.lru_cache(maxsize=4096)
def _placeholder(sequence: int) -> AgentMessage:
    # A storing Step builds one per window message; they are immutable, so each is built once.
    return AgentMessage(sequence, MessageRole.USER, "")


def _apply(context: Context, plan: StoragePlan) -> None:
    for message in plan.message_writes:
        AGENT_MESSAGES.set(context, message_sequence_key(message.sequence), message)
    for key in plan.message_delete_keys:
        AGENT_MESSAGES.delete(context, key)
    for chunk in plan.chunk_writes:
        AGENT_MESSAGE_CHUNKS.set(context, chunk.key, chunk)
    for key in plan.chunk_delete_keys:
        AGENT_MESSAGE_CHUNKS.delete(context, key)
    if plan.index_changed and plan.index is not None:
        AGENT_MESSAGE_INDEX.set(context, plan.index)
    if plan.chunk_writes or plan.chunk_deletes:
        _logger.debug(
            "message storage: %d chunks written (%d bytes), %d deleted, %d messages moved",
            len(plan.chunk_writes),
            plan.chunk_bytes,
            len(plan.chunk_deletes),
            len(plan.message_deletes),
        )
