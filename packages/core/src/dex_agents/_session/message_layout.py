"""The session's message storage layout, as pure planning over plain values.

The newest messages are the window: one ``AgentMessages`` instance per message. When the window
holds more than ``message_window_size`` messages, its oldest messages move into immutable
``AgentMessageChunks`` instances in the same commit; ``AgentMessageIndex`` lists each kept chunk,
where the window starts, and the oldest stored message. With compaction, retention deletes the
oldest chunks once a summary covers them and enough newer messages are stored.

Nothing here touches Dex. A Step loads the window (every ``AgentMessages`` instance) and the index,
asks :func:`plan_message_storage` what to write and delete, and applies the returned
:class:`StoragePlan` in its own commit. Readers load the chunks that :func:`chunks_to_load` names and
rebuild the messages with :func:`assemble_stored_messages`.

Layout invariants, which every plan keeps:

- The stored sequences are ``index.first_sequence`` up to the newest message, with no gap; each is
  stored exactly once, either in one chunk or in ``AgentMessages``.
- Every sequence from ``first_sequence`` to ``window_first_sequence - 1`` is in a chunk.
- A message too large for a chunk of its own limit skips the window and is stored at once in a
  chunk of its own, so such a chunk can sit after ``window_first_sequence``; window messages are the
  ``AgentMessages`` instances from ``window_first_sequence`` on.
- A session without an index (stored by dex-agents 0.1.0, or one that never wrote a chunk) keeps
  every message in ``AgentMessages``: the whole session is the window.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from dex_agents._json_values import WireValue, resolve_wire_value_annotations
from dex_agents._values import (
    LIST_AGENT_MESSAGES_MAX_LIMIT,
    AgentMessage,
    AgentMessagesPage,
    message_sequence_key,
)
from dex_agents.exceptions import ConfigurationError, DexAgentsError

__all__ = [
    "DEFAULT_MESSAGE_CHUNK_MAX_BYTES",
    "DEFAULT_MESSAGE_CHUNK_SIZE",
    "DEFAULT_MESSAGE_WINDOW_SIZE",
    "DEFAULT_RETAINED_MESSAGE_LIMIT",
    "MAX_CHUNK_BYTES_PER_COMMIT",
    "MAX_CHUNK_COUNT_PER_COMMIT",
    "MAX_MESSAGE_CHUNK_MAX_BYTES",
    "AgentMessageChunk",
    "AgentMessageChunkRange",
    "AgentMessageIndex",
    "MessageLayoutError",
    "MessageStorageLimits",
    "StoragePlan",
    "assemble_stored_messages",
    "chunks_to_load",
    "deleted_before_sequence",
    "encoded_chunk_size",
    "encoded_json_size",
    "page_agent_messages",
    "plan_message_storage",
    "plan_retention",
]

DEFAULT_MESSAGE_WINDOW_SIZE: Final = 64
"""Messages the window holds before its oldest move into chunks."""
DEFAULT_MESSAGE_CHUNK_SIZE: Final = 32
"""Messages one chunk holds at most."""
DEFAULT_MESSAGE_CHUNK_MAX_BYTES: Final = 1024 * 1024
"""Encoded JSON bytes one chunk holds at most (1 MiB), unless one message alone is larger."""
MAX_MESSAGE_CHUNK_MAX_BYTES: Final = 8 * 1024 * 1024
"""The largest allowed ``message_chunk_max_bytes`` (8 MiB)."""
DEFAULT_RETAINED_MESSAGE_LIMIT: Final = 1_000
"""Messages retention always keeps after a deleted chunk."""
MAX_CHUNK_COUNT_PER_COMMIT: Final = 4
"""Chunks one commit writes at most (unless a single oversized message needs more)."""
MAX_CHUNK_BYTES_PER_COMMIT: Final = 8 * 1024 * 1024
"""Encoded chunk bytes one commit writes at most (unless a single oversized message needs more)."""

# ``{"messages":[...]}`` around the comma-separated messages; see ``encoded_chunk_size``.
_CHUNK_ENVELOPE_BYTES: Final = len('{"messages":[]}')


class MessageLayoutError(DexAgentsError, ValueError):
    """Stored messages, chunks and index do not fit together, or new messages do not follow them."""


def encoded_json_size(value: WireValue) -> int:
    """Return the bytes of ``value`` as the Dex SDK encodes it.

    The SDK writes dataclass values as compact JSON with sorted keys and non-ASCII text escaped, so
    the text is ASCII and its length is its UTF-8 size. The size also bounds the UTF-8 size of
    :meth:`WireValue.to_json_text`, which leaves non-ASCII text unescaped.

    Raises:
        ValueError: When ``value`` holds NaN or an infinity.

    Example:
        >>> from dex_agents import AgentMessage, MessageRole
        >>> encoded_json_size(AgentMessage(1, MessageRole.USER, "{}", text="é")) > 0
        True
    """
    text = json.dumps(value.to_json(), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return len(text.encode("utf-8"))


def encoded_chunk_size(message_sizes: Iterable[int]) -> int:
    """Return the encoded size of a chunk whose messages have ``message_sizes`` bytes each.

    Example:
        >>> encoded_chunk_size([10, 20])
        46
    """
    sizes = list(message_sizes)
    return _CHUNK_ENVELOPE_BYTES + sum(sizes) + max(len(sizes) - 1, 0)


@dataclass(frozen=True)
class MessageStorageLimits:
    """How messages are laid out: window size, chunk limits, and retention.

    Attributes:
        message_window_size: Messages the window holds before its oldest move into chunks (64).
        message_chunk_size: Messages per chunk at most (32).
        message_chunk_max_bytes: Encoded JSON bytes per chunk at most (1 MiB, at most 8 MiB). A
            message larger than this goes into a chunk of its own.
        retained_message_limit: With compaction, messages always kept after a deleted chunk
            (1,000); ``None`` keeps every message.

    Raises:
        ConfigurationError: When a limit is not a positive int, ``message_chunk_max_bytes`` exceeds 8 MiB,
            or ``retained_message_limit`` is negative.

    Example:
        >>> MessageStorageLimits(message_window_size=128).message_chunk_size
        32
    """

    message_window_size: int = DEFAULT_MESSAGE_WINDOW_SIZE
    message_chunk_size: int = DEFAULT_MESSAGE_CHUNK_SIZE
    message_chunk_max_bytes: int = DEFAULT_MESSAGE_CHUNK_MAX_BYTES
    retained_message_limit: int | None = DEFAULT_RETAINED_MESSAGE_LIMIT

    def __post_init__(self) -> None:
        _require_positive_int("message_window_size", self.message_window_size)
        _require_positive_int("message_chunk_size", self.message_chunk_size)
        _require_positive_int("message_chunk_max_bytes", self.message_chunk_max_bytes)
        if self.message_chunk_max_bytes > MAX_MESSAGE_CHUNK_MAX_BYTES:
            raise ConfigurationError(
                "message_chunk_max_bytes must be at most 8 MiB "
                f"({MAX_MESSAGE_CHUNK_MAX_BYTES} bytes), got {self.message_chunk_max_bytes}"
            )
        limit = self.retained_message_limit
        if limit is not None and (not _is_int(limit) or limit < 0):
            raise ConfigurationError(
                f"retained_message_limit must be a non-negative int or None, got {limit!r}"
            )


@dataclass(frozen=True)
class AgentMessageChunk(WireValue):
    """An ``AgentMessageChunks`` value: consecutive messages, immutable once written.

    Its key is ``message_sequence_key(first_sequence)``.

    Raises:
        MessageLayoutError: When ``messages`` is empty or its sequences are not consecutive.

    Example:
        >>> from dex_agents import AgentMessage, MessageRole
        >>> chunk = AgentMessageChunk((AgentMessage(5, MessageRole.USER, "{}"),))
        >>> chunk.key, chunk.last_sequence
        ('000000000005', 5)
    """

    messages: tuple[AgentMessage, ...]

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.messages:
            raise MessageLayoutError("an AgentMessageChunk must hold at least one message")
        first = self.messages[0].sequence
        for offset, message in enumerate(self.messages):
            if message.sequence != first + offset:
                raise MessageLayoutError(
                    "an AgentMessageChunk must hold consecutive sequences, but "
                    f"{message.sequence} follows {first + offset - 1}"
                )

    @property
    def first_sequence(self) -> int:
        """Sequence of the chunk's first message."""
        return self.messages[0].sequence

    @property
    def last_sequence(self) -> int:
        """Sequence of the chunk's last message."""
        return self.messages[-1].sequence

    @property
    def key(self) -> str:
        """The ``AgentMessageChunks`` instance key, ``message_sequence_key(first_sequence)``."""
        return message_sequence_key(self.first_sequence)

    @property
    def range(self) -> AgentMessageChunkRange:
        """The chunk's entry in ``AgentMessageIndex.chunks``."""
        return AgentMessageChunkRange(self.first_sequence, self.last_sequence)


@dataclass(frozen=True)
class AgentMessageChunkRange(WireValue):
    """One kept chunk in ``AgentMessageIndex.chunks``: its first and last sequence.

    Raises:
        MessageLayoutError: When a sequence is below 1 or ``last_sequence < first_sequence``.

    Example:
        >>> AgentMessageChunkRange(33, 64).key
        '000000000033'
    """

    first_sequence: int
    last_sequence: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.first_sequence < 1 or self.last_sequence < self.first_sequence:
            raise MessageLayoutError(
                "a chunk range needs 1 <= first_sequence <= last_sequence, got "
                f"{self.first_sequence}..{self.last_sequence}"
            )

    @property
    def key(self) -> str:
        """The ``AgentMessageChunks`` instance key of the chunk."""
        return message_sequence_key(self.first_sequence)

    @property
    def message_count(self) -> int:
        """Messages the chunk holds."""
        return self.last_sequence - self.first_sequence + 1


@dataclass(frozen=True)
class AgentMessageIndex(WireValue):
    """The ``AgentMessageIndex`` Attribute; it changes only when chunks are written or deleted.

    Attributes:
        chunks: Every kept chunk, ascending and disjoint.
        window_first_sequence: Where the window starts: every sequence from ``first_sequence``
            before it is in a chunk, and ``AgentMessages`` holds the messages from it on (apart
            from oversized messages, which sit in chunks of their own).
        first_sequence: The oldest stored message; retention deleted every message before it.

    Raises:
        MessageLayoutError: When the chunks overlap, are out of order, or do not cover
            ``first_sequence`` up to ``window_first_sequence`` without a gap.

    Example:
        >>> index = AgentMessageIndex((AgentMessageChunkRange(1, 32),), window_first_sequence=33)
        >>> index.first_sequence, [chunk.key for chunk in index.chunks]
        (1, ['000000000001'])
    """

    chunks: tuple[AgentMessageChunkRange, ...] = ()
    window_first_sequence: int = 1
    first_sequence: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.first_sequence < 1 or self.window_first_sequence < self.first_sequence:
            raise MessageLayoutError(
                "AgentMessageIndex needs 1 <= first_sequence <= window_first_sequence, got "
                f"first_sequence {self.first_sequence} and window_first_sequence "
                f"{self.window_first_sequence}"
            )
        expected = self.first_sequence
        previous_last = self.first_sequence - 1
        for chunk in self.chunks:
            if chunk.first_sequence <= previous_last:
                raise MessageLayoutError(
                    f"AgentMessageIndex chunk {chunk.first_sequence}..{chunk.last_sequence} "
                    f"overlaps or precedes sequence {previous_last}"
                )
            if chunk.first_sequence < self.window_first_sequence:
                if chunk.first_sequence != expected or chunk.last_sequence >= (
                    self.window_first_sequence
                ):
                    raise MessageLayoutError(
                        "AgentMessageIndex chunks must cover sequences "
                        f"{self.first_sequence}..{self.window_first_sequence - 1} without a gap, "
                        f"but chunk {chunk.first_sequence}..{chunk.last_sequence} does not "
                        f"start at {expected} or crosses the window start"
                    )
                expected = chunk.last_sequence + 1
            previous_last = chunk.last_sequence
        if expected != self.window_first_sequence:
            raise MessageLayoutError(
                f"AgentMessageIndex chunks end at sequence {expected - 1}, but the window starts "
                f"at {self.window_first_sequence}"
            )

    @property
    def has_deleted_messages(self) -> bool:
        """Whether retention deleted messages (every sequence before ``first_sequence``)."""
        return self.first_sequence > 1


@dataclass(frozen=True)
class StoragePlan:
    """What one commit writes and deletes to store messages; apply all of it or none.

    Attributes:
        message_writes: ``AgentMessages`` instances to set, keyed by ``message_sequence_key``.
        message_deletes: Sequences whose ``AgentMessages`` instances to delete (moved to chunks).
        chunk_writes: ``AgentMessageChunks`` instances to set, keyed by ``chunk.key``.
        chunk_deletes: Chunks whose ``AgentMessageChunks`` instances to delete (retention).
        index: The index after the commit; ``None`` while the session has never written a chunk,
            so an index-less session keeps its layout.
        index_changed: Whether to write ``index`` to ``AgentMessageIndex``.
        chunk_bytes: Encoded bytes of the chunks this commit writes (for metrics).

    Example:
        >>> StoragePlan(index=None).chunk_writes
        ()
    """

    message_writes: tuple[AgentMessage, ...] = ()
    message_deletes: tuple[int, ...] = ()
    chunk_writes: tuple[AgentMessageChunk, ...] = ()
    chunk_deletes: tuple[AgentMessageChunkRange, ...] = ()
    index: AgentMessageIndex | None = None
    index_changed: bool = False
    chunk_bytes: int = field(default=0, compare=False)

    @property
    def message_delete_keys(self) -> tuple[str, ...]:
        """``AgentMessages`` keys of :attr:`message_deletes`."""
        return tuple(message_sequence_key(sequence) for sequence in self.message_deletes)

    @property
    def chunk_delete_keys(self) -> tuple[str, ...]:
        """``AgentMessageChunks`` keys of :attr:`chunk_deletes`."""
        return tuple(chunk.key for chunk in self.chunk_deletes)


def plan_message_storage(
    window: Sequence[AgentMessage],
    index: AgentMessageIndex | None,
    limits: MessageStorageLimits,
    *,
    new_messages: Sequence[AgentMessage] = (),
    summary_last_sequence: int | None = None,
) -> StoragePlan:
    """Plan one commit that stores ``new_messages``, rolls the window over, and applies retention.

    A new message whose own chunk would exceed ``message_chunk_max_bytes`` skips the window and is
    written as a chunk of its own, so a message too large for the Server fails this commit. When
    the window then holds more than ``message_window_size`` messages, its oldest messages move into
    chunks of up to ``message_chunk_size`` messages and ``message_chunk_max_bytes`` bytes; one
    commit writes at most 4 chunks and 8 MiB of chunks, oversized messages' own chunks included
    (those are always written), so the window may stay larger for a few commits. With ``summary_last_sequence`` set, :func:`plan_retention` then deletes the oldest
    chunks it allows.

    Args:
        window: Every ``AgentMessages`` instance the Step loaded, in any order.
        index: The ``AgentMessageIndex`` value, or ``None`` when it is unset (the old layout).
        limits: The session's storage limits.
        new_messages: Messages to store, whose sequences follow the newest stored message.
        summary_last_sequence: ``ContextSummary.last_sequence``, or ``None`` without a summary,
            which deletes nothing.

    Returns:
        The writes and deletes of this commit.

    Raises:
        MessageLayoutError: When the window does not fit the index, or ``new_messages`` do not
            continue the stored sequences.

    Example:
        >>> plan = plan_message_storage([], None, MessageStorageLimits(), new_messages=messages[:1])
        >>> [stored.sequence for stored in plan.message_writes], plan.index
        ([1], None)
    """
    layout = _Layout.load(window, index)
    layout.check_new_messages(new_messages)
    planner = _CommitPlanner(layout, limits)
    planner.store_new_messages(new_messages)
    planner.roll_window_over()
    if summary_last_sequence is not None:
        planner.apply_retention(summary_last_sequence, limits.retained_message_limit)
    return planner.finish()


def plan_retention(
    index: AgentMessageIndex,
    *,
    summary_last_sequence: int | None,
    retained_message_limit: int | None,
    last_message_sequence: int,
) -> tuple[AgentMessageChunkRange, ...]:
    """Return the chunks retention deletes now, oldest first.

    Retention deletes the oldest stored chunk while every message in it is at or before
    ``summary_last_sequence`` and at least ``retained_message_limit`` messages are stored after it,
    so the newest ``retained_message_limit`` messages and every message after the summary stay.
    It never deletes window messages, nor a chunk with an older message still stored.

    Args:
        index: The index after this commit's chunk writes.
        summary_last_sequence: ``ContextSummary.last_sequence``; ``None`` deletes nothing.
        retained_message_limit: Messages to keep after a deleted chunk; ``None`` deletes nothing.
        last_message_sequence: The newest stored sequence (``AgentState.last_message_sequence``).

    Raises:
        ConfigurationError: When ``retained_message_limit`` is negative.

    Example:
        >>> index = AgentMessageIndex((AgentMessageChunkRange(1, 32),), window_first_sequence=33)
        >>> plan_retention(index, summary_last_sequence=40, retained_message_limit=10,
        ...                last_message_sequence=50)
        (AgentMessageChunkRange(first_sequence=1, last_sequence=32),)
    """
    if summary_last_sequence is None or retained_message_limit is None:
        return ()
    if retained_message_limit < 0:
        raise ConfigurationError(
            f"retained_message_limit must not be negative, got {retained_message_limit}"
        )
    deleted: list[AgentMessageChunkRange] = []
    oldest = index.first_sequence
    for chunk in index.chunks:
        if chunk.first_sequence != oldest or chunk.first_sequence >= index.window_first_sequence:
            break
        if chunk.last_sequence > summary_last_sequence:
            break
        if last_message_sequence - chunk.last_sequence < retained_message_limit:
            break
        deleted.append(chunk)
        oldest = chunk.last_sequence + 1
    return tuple(deleted)


def chunks_to_load(
    index: AgentMessageIndex | None, *, after_sequence: int | None = None
) -> tuple[AgentMessageChunkRange, ...]:
    """Return the kept chunks that hold a message after ``after_sequence``.

    ``RunModel`` with compaction passes ``ContextSummary.last_sequence`` and loads only the chunks
    after the summary; without compaction, and for ``get_agent_snapshot`` and
    ``list_agent_messages``, pass ``None`` to load every kept chunk.

    Example:
        >>> index = AgentMessageIndex(
        ...     (AgentMessageChunkRange(1, 32), AgentMessageChunkRange(33, 64)),
        ...     window_first_sequence=65)
        >>> [chunk.key for chunk in chunks_to_load(index, after_sequence=40)]
        ['000000000033']
    """
    if index is None:
        return ()
    if after_sequence is None:
        return index.chunks
    return tuple(chunk for chunk in index.chunks if chunk.last_sequence > after_sequence)


def assemble_stored_messages(
    window: Sequence[AgentMessage],
    index: AgentMessageIndex | None,
    chunks: Iterable[AgentMessageChunk],
    *,
    after_sequence: int | None = None,
) -> tuple[AgentMessage, ...]:
    """Return the stored messages after ``after_sequence`` (all with ``None``), oldest first.

    Args:
        window: Every ``AgentMessages`` instance, in any order.
        index: The ``AgentMessageIndex`` value, or ``None`` for the old layout.
        chunks: At least the chunks :func:`chunks_to_load` named for the same ``after_sequence``;
            others are ignored.
        after_sequence: Leave out messages up to this sequence, such as the summarized ones.

    Raises:
        MessageLayoutError: When a needed chunk is missing, a chunk differs from its index entry,
            or the messages have a gap or a duplicate.

    Example:
        >>> [message.sequence for message in assemble_stored_messages(messages, None, ())]
        [1, 2, 3]
    """
    layout = _Layout.load(window, index)
    loaded = {chunk.first_sequence: chunk for chunk in chunks}
    messages: list[AgentMessage] = []
    for entry in chunks_to_load(index, after_sequence=after_sequence):
        chunk = loaded.get(entry.first_sequence)
        if chunk is None:
            raise MessageLayoutError(
                f"AgentMessageChunks instance {entry.key} listed in AgentMessageIndex is not "
                "loaded or missing; load every chunk that chunks_to_load names"
            )
        if chunk.range != entry:
            raise MessageLayoutError(
                f"AgentMessageChunks instance {entry.key} holds sequences "
                f"{chunk.first_sequence}..{chunk.last_sequence}, but AgentMessageIndex lists "
                f"{entry.first_sequence}..{entry.last_sequence}"
            )
        messages.extend(chunk.messages)
    messages.extend(layout.window)
    messages.sort(key=lambda message: message.sequence)
    start = layout.first_sequence if after_sequence is None else after_sequence + 1
    kept = [message for message in messages if message.sequence >= start]
    _require_consecutive(kept, start if after_sequence is None else None)
    return tuple(kept)


def deleted_before_sequence(index: AgentMessageIndex | None) -> int | None:
    """Return ``AgentMessagesPage.deleted_before_sequence``: set once retention deleted messages.

    Example:
        >>> deleted_before_sequence(AgentMessageIndex((), 40, 40))
        40
    """
    if index is None or not index.has_deleted_messages:
        return None
    return index.first_sequence


def page_agent_messages(
    messages: Sequence[AgentMessage],
    index: AgentMessageIndex | None,
    *,
    after_sequence: int | None,
    limit: int,
) -> AgentMessagesPage:
    """Return one ``list_agent_messages`` page, oldest first.

    The page holds the stored messages after ``after_sequence`` (from the oldest stored message,
    ``AgentMessageIndex.first_sequence``, when ``None`` or when the requested messages were
    deleted), at most ``limit`` of them with ``limit`` clamped to 1..200.
    ``deleted_before_sequence`` is set on every page once retention deleted messages, so a reader
    that resumes after a deleted sequence sees where the gap ends.

    Args:
        messages: Every stored message, ascending, as :func:`assemble_stored_messages` returns.
        index: The ``AgentMessageIndex`` value, or ``None``.
        after_sequence: The previous page's ``next_after_sequence``, or ``None``.
        limit: Requested page size.

    Example:
        >>> page = page_agent_messages(messages, None, after_sequence=None, limit=2)
        >>> [m.sequence for m in page.messages], page.next_after_sequence
        ([1, 2], 2)
    """
    clamped = min(max(limit, 1), LIST_AGENT_MESSAGES_MAX_LIMIT)
    start = 0 if after_sequence is None else after_sequence
    remaining = [message for message in messages if message.sequence > start]
    page = tuple(remaining[:clamped])
    return AgentMessagesPage(
        messages=page,
        next_after_sequence=page[-1].sequence if len(remaining) > clamped else None,
        deleted_before_sequence=deleted_before_sequence(index),
    )


@dataclass
class _Layout:
    """The loaded layout, normalized: an old-layout session reads as one large window."""

    window: list[AgentMessage]
    chunks: list[AgentMessageChunkRange]
    window_first_sequence: int
    first_sequence: int
    has_index: bool

    @classmethod
    def load(cls, window: Sequence[AgentMessage], index: AgentMessageIndex | None) -> _Layout:
        ordered = sorted(window, key=lambda message: message.sequence)
        if index is None:
            first = ordered[0].sequence if ordered else 1
            _require_consecutive(ordered, first)
            return cls(ordered, [], first, first, has_index=False)
        layout = cls(
            ordered,
            list(index.chunks),
            index.window_first_sequence,
            index.first_sequence,
            has_index=True,
        )
        layout.check_window()
        return layout

    def check_window(self) -> None:
        """Check that the window and the chunks from the window start tile the sequences."""
        expected = self.window_first_sequence
        later_chunks = [c for c in self.chunks if c.first_sequence >= self.window_first_sequence]
        pieces = sorted(
            [(message.sequence, message.sequence) for message in self.window]
            + [(chunk.first_sequence, chunk.last_sequence) for chunk in later_chunks]
        )
        for first, last in pieces:
            if first != expected:
                problem = (
                    "a duplicate or a message before the window start"
                    if first < expected
                    else "a gap"
                )
                raise MessageLayoutError(
                    f"stored messages do not fit AgentMessageIndex: {problem} at sequence "
                    f"{first} (expected {expected})"
                )
            expected = last + 1

    @property
    def last_sequence(self) -> int:
        last = self.window_first_sequence - 1
        if self.window:
            last = max(last, self.window[-1].sequence)
        if self.chunks:
            last = max(last, self.chunks[-1].last_sequence)
        return last

    def check_new_messages(self, new_messages: Sequence[AgentMessage]) -> None:
        expected = self.last_sequence + 1
        for message in new_messages:
            if message.sequence != expected:
                raise MessageLayoutError(
                    f"new message sequence {message.sequence} does not follow the newest stored "
                    f"message; expected {expected}"
                )
            expected += 1

    def advance_window_start(self) -> None:
        """Move the window start past chunks that begin at it, so the prefix stays chunked."""
        starts = {chunk.first_sequence: chunk for chunk in self.chunks}
        while (chunk := starts.get(self.window_first_sequence)) is not None:
            self.window_first_sequence = chunk.last_sequence + 1


class _CommitPlanner:
    """Builds one :class:`StoragePlan`, tracking this commit's chunk budget."""

    def __init__(self, layout: _Layout, limits: MessageStorageLimits) -> None:
        self._layout = layout
        self._limits = limits
        # Measured on demand: only messages that may move need their size.
        self._sizes: dict[int, int] = {}
        self._new_sequences: set[int] = set()
        self._moved: list[int] = []
        self._chunk_writes: list[AgentMessageChunk] = []
        self._chunk_deletes: list[AgentMessageChunkRange] = []
        self._written_bytes = 0
        self._index_changed = False

    def store_new_messages(self, new_messages: Sequence[AgentMessage]) -> None:
        for message in new_messages:
            if encoded_chunk_size([self._size(message)]) > self._limits.message_chunk_max_bytes:
                self._write_chunk([message])
            else:
                self._layout.window.append(message)
                self._new_sequences.add(message.sequence)

    def roll_window_over(self) -> None:
        layout = self._layout
        while len(layout.window) > self._limits.message_window_size:
            if len(self._chunk_writes) >= MAX_CHUNK_COUNT_PER_COMMIT:
                return
            batch = self._next_chunk_batch()
            batch_bytes = encoded_chunk_size(self._size(m) for m in batch)
            if self._written_bytes + batch_bytes > MAX_CHUNK_BYTES_PER_COMMIT:
                return
            del layout.window[: len(batch)]
            self._moved.extend(m.sequence for m in batch if m.sequence not in self._new_sequences)
            self._write_chunk(batch)

    def apply_retention(self, summary_last_sequence: int, retained_limit: int | None) -> None:
        layout = self._layout
        current = self._index()
        deleted = plan_retention(
            current,
            summary_last_sequence=summary_last_sequence,
            retained_message_limit=retained_limit,
            last_message_sequence=layout.last_sequence,
        )
        if not deleted:
            return
        written = {chunk.first_sequence: chunk for chunk in self._chunk_writes}
        for chunk in deleted:
            # A chunk written and deleted in one commit is simply never written.
            if written.pop(chunk.first_sequence, None) is None:
                self._chunk_deletes.append(chunk)
        self._chunk_writes = list(written.values())
        layout.chunks = layout.chunks[len(deleted) :]
        layout.first_sequence = deleted[-1].last_sequence + 1
        self._index_changed = True

    def finish(self) -> StoragePlan:
        layout = self._layout
        writes = tuple(m for m in layout.window if m.sequence in self._new_sequences)
        index = self._index() if self._index_changed or layout.has_index else None
        return StoragePlan(
            message_writes=writes,
            message_deletes=tuple(self._moved),
            chunk_writes=tuple(self._chunk_writes),
            chunk_deletes=tuple(self._chunk_deletes),
            index=index,
            index_changed=self._index_changed,
            chunk_bytes=self._written_bytes,
        )

    def _next_chunk_batch(self) -> list[AgentMessage]:
        """The oldest window messages that fit one chunk: consecutive, by count and bytes."""
        window = self._layout.window
        batch = [window[0]]
        total = encoded_chunk_size([self._size(window[0])])
        for message in window[1 : self._limits.message_chunk_size]:
            # An oversized message's own chunk sits between; a chunk never spans it.
            if message.sequence != batch[-1].sequence + 1:
                break
            grown = total + 1 + self._size(message)
            if grown > self._limits.message_chunk_max_bytes:
                break
            batch.append(message)
            total = grown
        return batch

    def _size(self, message: AgentMessage) -> int:
        size = self._sizes.get(message.sequence)
        if size is None:
            size = self._sizes[message.sequence] = encoded_json_size(message)
        return size

    def _write_chunk(self, messages: list[AgentMessage]) -> None:
        chunk = AgentMessageChunk(tuple(messages))
        self._written_bytes += encoded_chunk_size(self._size(m) for m in messages)
        self._chunk_writes.append(chunk)
        layout = self._layout
        layout.chunks.append(chunk.range)
        layout.chunks.sort(key=lambda entry: entry.first_sequence)
        layout.advance_window_start()
        self._index_changed = True

    def _index(self) -> AgentMessageIndex:
        layout = self._layout
        return AgentMessageIndex(
            chunks=tuple(layout.chunks),
            window_first_sequence=layout.window_first_sequence,
            first_sequence=layout.first_sequence,
        )


def _require_consecutive(messages: Sequence[AgentMessage], first: int | None) -> None:
    expected = first if first is not None else (messages[0].sequence if messages else 0)
    for message in messages:
        if message.sequence != expected:
            problem = "duplicate" if message.sequence < expected else "gap"
            raise MessageLayoutError(
                f"stored messages have a {problem} at sequence {message.sequence} "
                f"(expected {expected})"
            )
        expected += 1


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require_positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be a positive int, got {value!r}")


resolve_wire_value_annotations(__name__)
