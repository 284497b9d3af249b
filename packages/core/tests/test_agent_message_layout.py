"""Message storage layout: window rollover, chunk limits, retention, paging, and the old layout.

The layout is pure planning, so these tests apply each :class:`StoragePlan` to an in-memory model
of the three persistence names (``AgentMessages``, ``AgentMessageChunks``, ``AgentMessageIndex``)
the way a Step's commit would, and check the invariants after every commit.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import pytest
from dex import CodecRegistry
from dex_agents import (
    AgentMessage,
    AgentMessageChunk,
    AgentMessageIndex,
    ConfigurationError,
    MessageRole,
    message_sequence_key,
)
from dex_agents._session.message_layout import (
    MAX_CHUNK_BYTES_PER_COMMIT,
    MAX_CHUNK_COUNT_PER_COMMIT,
    AgentMessageChunkRange,
    MessageLayoutError,
    MessageStorageLimits,
    StoragePlan,
    assemble_stored_messages,
    chunks_to_load,
    deleted_before_sequence,
    encoded_chunk_size,
    encoded_json_size,
    page_agent_messages,
    plan_message_storage,
    plan_retention,
)

LIMITS = MessageStorageLimits()


def message(sequence: int, text_bytes: int = 20, *, text: str | None = None) -> AgentMessage:
    body = text if text is not None else "x" * text_bytes
    return AgentMessage(sequence, MessageRole.USER, framework_item=body, turn_id="turn-1")


def messages(first: int, last: int, text_bytes: int = 20) -> list[AgentMessage]:
    return [message(sequence, text_bytes) for sequence in range(first, last + 1)]


def sized_message(sequence: int, encoded_bytes: int) -> AgentMessage:
    """A message whose SDK encoding is exactly ``encoded_bytes`` long."""
    overhead = encoded_json_size(message(sequence, 0))
    return message(sequence, encoded_bytes - overhead)


@dataclass
class StoredSession:
    """The three persistence names of one session, changed only by whole plans."""

    window: dict[int, AgentMessage] = field(default_factory=dict)
    chunks: dict[str, AgentMessageChunk] = field(default_factory=dict)
    index: AgentMessageIndex | None = None
    commits: list[StoragePlan] = field(default_factory=list)

    def store(
        self,
        new_messages: Sequence[AgentMessage] = (),
        limits: MessageStorageLimits = LIMITS,
        summary_last_sequence: int | None = None,
    ) -> StoragePlan:
        plan = plan_message_storage(
            list(self.window.values()),
            self.index,
            limits,
            new_messages=new_messages,
            summary_last_sequence=summary_last_sequence,
        )
        self.apply(plan)
        return plan

    def apply(self, plan: StoragePlan) -> None:
        for written in plan.message_writes:
            assert written.sequence not in self.window
            self.window[written.sequence] = written
        for sequence in plan.message_deletes:
            del self.window[sequence]
        for chunk in plan.chunk_writes:
            assert chunk.key not in self.chunks, "chunks are immutable: never written twice"
            self.chunks[chunk.key] = chunk
        for deleted in plan.chunk_deletes:
            del self.chunks[deleted.key]
        if plan.index_changed:
            self.index = plan.index
        else:
            assert plan.index == self.index
        self.commits.append(plan)
        self.check_invariants()

    def check_invariants(self) -> None:
        if self.index is None:
            assert not self.chunks
        else:
            assert {entry.key for entry in self.index.chunks} == set(self.chunks)
            for entry in self.index.chunks:
                assert self.chunks[entry.key].range == entry
            assert all(s >= self.index.window_first_sequence for s in self.window)
        self.read()  # raises on a gap or a duplicate

    def read(self, after_sequence: int | None = None) -> tuple[AgentMessage, ...]:
        return assemble_stored_messages(
            list(self.window.values()),
            self.index,
            self.chunks.values(),
            after_sequence=after_sequence,
        )


def test_limits_defaults_and_validation() -> None:
    assert (LIMITS.message_window_size, LIMITS.message_chunk_size) == (64, 32)
    assert LIMITS.message_chunk_max_bytes == 1024 * 1024
    assert LIMITS.retained_message_limit == 1_000
    MessageStorageLimits(message_chunk_max_bytes=8 * 1024 * 1024, retained_message_limit=None)
    with pytest.raises(ConfigurationError, match="at most 8 MiB"):
        MessageStorageLimits(message_chunk_max_bytes=8 * 1024 * 1024 + 1)
    with pytest.raises(ConfigurationError, match="message_window_size must be a positive int"):
        MessageStorageLimits(message_window_size=0)
    with pytest.raises(ConfigurationError, match="message_chunk_size must be a positive int"):
        MessageStorageLimits(message_chunk_size=True)
    with pytest.raises(ConfigurationError, match="retained_message_limit"):
        MessageStorageLimits(retained_message_limit=-1)


def test_encoded_size_matches_the_sdk_codec_including_non_ascii_text() -> None:
    codec = CodecRegistry().resolve(AgentMessage)
    for value in (message(1, 10), message(2, text="grüße 日本 🎉 \u2028")):
        payload = codec.encode(value).data
        assert isinstance(payload, str)
        assert encoded_json_size(value) == len(payload.encode("utf-8"))
        assert encoded_json_size(value) >= len(value.to_json_text().encode("utf-8"))
    chunk = AgentMessageChunk((message(1, 10), message(2, text="é"), message(3, 0)))
    chunk_payload = CodecRegistry().resolve(AgentMessageChunk).encode(chunk).data
    assert isinstance(chunk_payload, str)
    sizes = [encoded_json_size(item) for item in chunk.messages]
    assert encoded_chunk_size(sizes) == encoded_json_size(chunk) == len(chunk_payload)


def test_chunk_and_index_round_trip_through_the_sdk_codec() -> None:
    registry = CodecRegistry()
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    chunk = AgentMessageChunk((message(7, 3), replace(message(8, 3), created_at=now)))
    chunk_codec = registry.resolve(AgentMessageChunk)
    assert chunk_codec.decode(chunk_codec.encode(chunk)) == chunk
    index = AgentMessageIndex((AgentMessageChunkRange(1, 6), AgentMessageChunkRange(7, 8)), 9, 1)
    index_codec = registry.resolve(AgentMessageIndex)
    assert index_codec.decode(index_codec.encode(index)) == index


def test_values_round_trip_and_reject_broken_layouts() -> None:
    chunk = AgentMessageChunk(tuple(messages(5, 7)))
    assert AgentMessageChunk.from_json_text(chunk.to_json_text()) == chunk
    assert (chunk.key, chunk.range) == ("000000000005", AgentMessageChunkRange(5, 7))
    index = AgentMessageIndex((AgentMessageChunkRange(1, 32),), 33, 1)
    assert AgentMessageIndex.from_json(index.to_json()) == index
    with pytest.raises(MessageLayoutError, match="consecutive"):
        AgentMessageChunk((message(1), message(3)))
    with pytest.raises(MessageLayoutError, match="at least one message"):
        AgentMessageChunk(())
    with pytest.raises(MessageLayoutError, match="without a gap"):
        AgentMessageIndex((AgentMessageChunkRange(1, 10), AgentMessageChunkRange(12, 20)), 21)
    with pytest.raises(MessageLayoutError, match="overlaps"):
        AgentMessageIndex((AgentMessageChunkRange(1, 10), AgentMessageChunkRange(5, 20)), 21)
    with pytest.raises(MessageLayoutError, match="window starts"):
        AgentMessageIndex((AgentMessageChunkRange(1, 10),), 15)


def test_a_window_of_exactly_64_stays_and_the_65th_message_moves_one_full_chunk() -> None:
    session = StoredSession()
    for sequence in range(1, 65):
        plan = session.store([message(sequence)])
        assert plan.message_writes == (message(sequence),)
        assert plan.chunk_writes == () and plan.index is None
    assert len(session.window) == 64 and session.index is None

    plan = session.store([message(65)])
    assert [chunk.range for chunk in plan.chunk_writes] == [AgentMessageChunkRange(1, 32)]
    assert plan.message_deletes == tuple(range(1, 33))
    assert plan.message_writes == (message(65),)
    assert plan.index == AgentMessageIndex((AgentMessageChunkRange(1, 32),), 33, 1)
    assert sorted(session.window) == list(range(33, 66))
    assert [m.sequence for m in session.read()] == list(range(1, 66))

    # The window refills to 64 before the next chunk moves.
    for sequence in range(66, 97):
        assert session.store([message(sequence)]).chunk_writes == ()
    assert len(session.window) == 64
    assert session.store([message(97)]).chunk_writes[0].range == AgentMessageChunkRange(33, 64)


def test_new_messages_that_roll_over_in_their_own_commit_are_never_written_to_the_window() -> None:
    session = StoredSession()
    plan = session.store(messages(1, 70))
    assert [chunk.range for chunk in plan.chunk_writes] == [AgentMessageChunkRange(1, 32)]
    assert [m.sequence for m in plan.message_writes] == list(range(33, 71))
    assert plan.message_deletes == ()


def test_chunks_respect_the_byte_limit() -> None:
    limits = MessageStorageLimits(message_chunk_max_bytes=4_000)
    session = StoredSession()
    session.store([sized_message(s, 1_000) for s in range(1, 66)], limits)
    assert session.index is not None
    for chunk in session.chunks.values():
        sizes = [encoded_json_size(item) for item in chunk.messages]
        assert encoded_chunk_size(sizes) <= 4_000
        assert encoded_json_size(chunk) <= 4_000
    # 1,000-byte messages fit three to a 4,000-byte chunk, not four.
    assert [entry.message_count for entry in session.index.chunks][:1] == [3]


def test_an_oversized_message_skips_the_window_into_its_own_chunk_at_once() -> None:
    limits = MessageStorageLimits(message_chunk_max_bytes=5_000)
    session = StoredSession()
    session.store(messages(1, 10))
    big = sized_message(11, 10_000)
    plan = session.store([big, message(12)], limits)
    assert [chunk.range for chunk in plan.chunk_writes] == [AgentMessageChunkRange(11, 11)]
    assert [m.sequence for m in plan.message_writes] == [12]
    assert session.index == AgentMessageIndex((AgentMessageChunkRange(11, 11),), 1, 1)
    assert 11 not in session.window
    assert [m.sequence for m in session.read()] == list(range(1, 13))

    # A later rollover never spans the oversized chunk, and the window start moves past it.
    session.store(messages(13, 80), limits)
    assert session.index is not None
    ranges = [(entry.first_sequence, entry.last_sequence) for entry in session.index.chunks]
    assert (11, 11) in ranges
    assert not any(first < 11 < last for first, last in ranges)
    assert session.index.window_first_sequence > 12
    assert [m.sequence for m in session.read()] == list(range(1, 81))


def test_an_oversized_first_message_starts_the_index() -> None:
    limits = MessageStorageLimits(message_chunk_max_bytes=1_000)
    session = StoredSession()
    session.store([sized_message(1, 3_000)], limits)
    assert session.index == AgentMessageIndex((AgentMessageChunkRange(1, 1),), 2, 1)
    assert session.window == {}


def test_the_per_commit_cap_moves_at_most_four_chunks_over_several_commits() -> None:
    session = StoredSession()
    session.store(messages(1, 64 + 32 * 6))
    assert len(session.commits[-1].chunk_writes) == MAX_CHUNK_COUNT_PER_COMMIT
    assert len(session.window) == 64 + 32 * 2  # briefly above the window size
    plan = session.store([message(64 + 32 * 6 + 1)])
    assert len(plan.chunk_writes) == 3
    assert len(session.window) == 64 - 31
    nothing = session.store(())
    assert not (nothing.message_writes or nothing.chunk_writes or nothing.chunk_deletes)
    assert not (nothing.message_deletes or nothing.index_changed)


def test_the_per_commit_cap_moves_at_most_8_mib() -> None:
    limits = MessageStorageLimits(message_chunk_max_bytes=3 * 1024 * 1024)
    # Two of these fit a 3 MiB chunk; a fourth 2 MiB chunk would pass 8 MiB in one commit.
    megabyte_messages = [sized_message(s, 1024 * 1024 + 100) for s in range(1, 80)]
    session = StoredSession()
    session.store(megabyte_messages, limits)
    moved = [encoded_json_size(chunk) for chunk in session.commits[-1].chunk_writes]
    assert len(moved) == 3 and sum(moved) <= MAX_CHUNK_BYTES_PER_COMMIT
    assert session.commits[-1].chunk_bytes == sum(moved)
    commits_before = len(session.commits)
    while len(session.window) > limits.message_window_size:
        plan = session.store((), limits)
        assert plan.chunk_bytes <= MAX_CHUNK_BYTES_PER_COMMIT
        assert plan.chunk_writes
    assert len(session.commits) - commits_before >= 2


def test_an_old_layout_session_reads_as_one_window_and_leaves_it_over_several_commits() -> None:
    old_window = messages(1, 500)
    random.Random(7).shuffle(old_window)  # instance keys may arrive in any order
    session = StoredSession(window={m.sequence: m for m in old_window})
    assert [m.sequence for m in session.read()] == list(range(1, 501))
    assert page_agent_messages(session.read(), None, after_sequence=None, limit=3).messages == (
        message(1),
        message(2),
        message(3),
    )

    plan = plan_message_storage(list(session.window.values()), None, LIMITS)
    assert len(plan.chunk_writes) == MAX_CHUNK_COUNT_PER_COMMIT
    assert plan.message_deletes == tuple(range(1, 129))
    commits = 0
    sequence = 500
    while len(session.window) > LIMITS.message_window_size:
        sequence += 1
        session.store([message(sequence)])
        commits += 1
    assert commits == 4  # 4 chunks of 32 a commit: 501 -> 373 -> 246 -> 119 -> 56
    assert session.index is not None and session.index.first_sequence == 1
    assert [m.sequence for m in session.read()] == list(range(1, sequence + 1))


def test_the_window_must_fit_the_index_and_new_messages_must_follow() -> None:
    index = AgentMessageIndex((AgentMessageChunkRange(1, 32),), 33, 1)
    with pytest.raises(MessageLayoutError, match="gap at sequence 35"):
        plan_message_storage([message(33), message(35)], index, LIMITS)
    with pytest.raises(MessageLayoutError, match="before the window start"):
        plan_message_storage([message(32), message(33)], index, LIMITS)
    with pytest.raises(MessageLayoutError, match="expected 34"):
        plan_message_storage([message(33)], index, LIMITS, new_messages=[message(35)])
    with pytest.raises(MessageLayoutError, match="gap"):
        plan_message_storage([message(1), message(3)], None, LIMITS)


def retention_index() -> AgentMessageIndex:
    chunks = (AgentMessageChunkRange(1, 32), AgentMessageChunkRange(33, 64))
    return AgentMessageIndex(chunks, window_first_sequence=65, first_sequence=1)


@pytest.mark.parametrize(
    ("summary_last", "limit", "last", "deleted"),
    [
        (31, 10, 200, []),  # summary ends inside the first chunk
        (32, 10, 200, [(1, 32)]),  # summary ends exactly at its last message
        (50, 10, 200, [(1, 32)]),  # summary inside the second chunk
        (64, 10, 200, [(1, 32), (33, 64)]),  # summary at the window start
        (150, 10, 200, [(1, 32), (33, 64)]),  # summary past every chunk: window messages stay
        (150, 136, 200, [(1, 32), (33, 64)]),  # exactly 136 messages after the second chunk
        (150, 137, 200, [(1, 32)]),  # one short for the second chunk
        (150, 169, 200, []),  # 168 after the first chunk: one short
        (150, 168, 200, [(1, 32)]),
        (None, 10, 200, []),  # no summary: nothing is deleted
        (150, None, 200, []),  # retained_message_limit None keeps everything
    ],
)
def test_retention_boundaries(
    summary_last: int | None, limit: int | None, last: int, deleted: list[tuple[int, int]]
) -> None:
    result = plan_retention(
        retention_index(),
        summary_last_sequence=summary_last,
        retained_message_limit=limit,
        last_message_sequence=last,
    )
    assert [(chunk.first_sequence, chunk.last_sequence) for chunk in result] == deleted


def test_retention_never_deletes_past_an_older_window_message() -> None:
    # An oversized chunk at 11 while 1..10 still sit in the window: not the oldest message.
    index = AgentMessageIndex((AgentMessageChunkRange(11, 11),), 1, 1)
    assert (
        plan_retention(
            index, summary_last_sequence=100, retained_message_limit=0, last_message_sequence=100
        )
        == ()
    )


def test_retention_in_a_storing_commit_updates_the_index_and_paging() -> None:
    session = StoredSession()
    session.store(messages(1, 100))
    session.store([message(101)])
    assert session.index is not None and len(session.index.chunks) == 2
    limits = MessageStorageLimits(retained_message_limit=30)
    plan = session.store([message(102)], limits, summary_last_sequence=90)
    assert [chunk.key for chunk in plan.chunk_deletes] == [
        message_sequence_key(1),
        message_sequence_key(33),
    ]
    assert session.index == AgentMessageIndex((), 65, 65)
    assert deleted_before_sequence(session.index) == 65
    stored = session.read()
    assert stored[0].sequence == 65

    first_page = page_agent_messages(stored, session.index, after_sequence=None, limit=10)
    assert first_page.messages[0].sequence == 65
    assert (first_page.next_after_sequence, first_page.deleted_before_sequence) == (74, 65)
    # A reader that stopped before the deletion resumes at the oldest stored message.
    resumed = page_agent_messages(stored, session.index, after_sequence=20, limit=10)
    assert resumed.messages[0].sequence == 65 and resumed.deleted_before_sequence == 65
    last_page = page_agent_messages(stored, session.index, after_sequence=100, limit=500)
    assert [m.sequence for m in last_page.messages] == [101, 102]
    assert last_page.next_after_sequence is None and last_page.deleted_before_sequence == 65


def test_a_chunk_written_and_deleted_in_one_commit_is_never_written() -> None:
    session = StoredSession()
    session.store(messages(1, 64))
    limits = MessageStorageLimits(retained_message_limit=0)
    plan = session.store([message(65)], limits, summary_last_sequence=40)
    assert plan.chunk_writes == () and plan.chunk_deletes == ()
    assert plan.message_deletes == tuple(range(1, 33))
    assert session.index == AgentMessageIndex((), 33, 33)


def test_paging_clamps_the_limit_and_has_no_deleted_marker_without_deletion() -> None:
    stored = messages(1, 450)
    assert len(page_agent_messages(stored, None, after_sequence=None, limit=0).messages) == 1
    page = page_agent_messages(stored, None, after_sequence=None, limit=10_000)
    assert len(page.messages) == 200 and page.next_after_sequence == 200
    assert page.deleted_before_sequence is None
    index = AgentMessageIndex((AgentMessageChunkRange(1, 32),), 33, 1)
    assert (
        page_agent_messages(stored, index, after_sequence=449, limit=5).deleted_before_sequence
        is None
    )
    assert page_agent_messages(stored, None, after_sequence=450, limit=5).messages == ()


def test_model_input_loads_only_the_chunks_after_the_summary() -> None:
    session = StoredSession()
    session.store(messages(1, 160))
    session.store([message(161)])
    index = session.index
    assert index is not None
    assert chunks_to_load(index) == index.chunks
    after = chunks_to_load(index, after_sequence=40)
    assert [entry.first_sequence for entry in after] == [33, 65, 97]
    assert chunks_to_load(index, after_sequence=128) == ()
    assert chunks_to_load(None, after_sequence=3) == ()

    loaded = [session.chunks[entry.key] for entry in after]
    tail = assemble_stored_messages(list(session.window.values()), index, loaded, after_sequence=40)
    assert [m.sequence for m in tail] == list(range(41, 162))
    with pytest.raises(MessageLayoutError, match="000000000033"):
        assemble_stored_messages(
            list(session.window.values()), index, loaded[1:], after_sequence=40
        )


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_every_message_stays_stored_once_and_in_order_across_rollovers_and_retention(
    seed: int,
) -> None:
    rng = random.Random(seed)
    limits = MessageStorageLimits(
        message_window_size=rng.randint(1, 20),
        message_chunk_size=rng.randint(1, 8),
        message_chunk_max_bytes=rng.choice([600, 2_000, 50_000]),
        retained_message_limit=rng.choice([None, 0, 5, 30]),
    )
    session = StoredSession()
    expected: list[AgentMessage] = []
    deleted_through = 0
    summary_last: int | None = None
    for _ in range(250):
        batch = [
            message(len(expected) + offset + 1, rng.choice([0, 10, 200, 900, 3_000]))
            for offset in range(rng.choice([0, 1, 1, 2, 5, 40]))
        ]
        expected.extend(batch)
        if expected and rng.random() < 0.15:
            summary_last = max(summary_last or 0, rng.randint(1, len(expected)))
        plan = session.store(batch, limits, summary_last)
        assert len(plan.chunk_writes) <= MAX_CHUNK_COUNT_PER_COMMIT or all(
            chunk.first_sequence == chunk.last_sequence for chunk in plan.chunk_writes
        )
        for chunk in plan.chunk_writes:
            size = encoded_json_size(chunk)
            assert size <= limits.message_chunk_max_bytes or len(chunk.messages) == 1
            assert len(chunk.messages) <= limits.message_chunk_size
        for deleted in plan.chunk_deletes:
            assert summary_last is not None and deleted.last_sequence <= summary_last
            assert limits.retained_message_limit is not None
            assert len(expected) - deleted.last_sequence >= limits.retained_message_limit
        if session.index is not None:
            deleted_through = session.index.first_sequence - 1
        if deleted_through:
            assert summary_last is not None and deleted_through <= summary_last
            assert limits.retained_message_limit is not None
            assert len(expected) - deleted_through >= limits.retained_message_limit
        assert list(session.read()) == expected[deleted_through:]
    # The window drains to its size once commits keep coming.
    for _ in range(200):
        if len(session.window) <= limits.message_window_size:
            break
        session.store((), limits, summary_last)
    assert len(session.window) <= limits.message_window_size
    first_kept = session.index.first_sequence if session.index is not None else 1
    assert list(session.read()) == expected[first_kept - 1 :]
