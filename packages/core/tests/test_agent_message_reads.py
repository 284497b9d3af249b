"""What reading stored messages decodes: the decoded-message cache and the snapshot's newest 200."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agent_session_test_support import ScriptedRunner, assistant, record_rpc_outputs
from compaction_test_support import swappable_worker_stack
from dex import (
    BlobCacheConfig,
    Client,
    ClientOptions,
    CodecRegistry,
    Registry,
    WorkerTarget,
    open_blob_cache,
)
from dex_agents import (
    AgentMessage,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    ConfigurationError,
    ListAgentMessagesRequest,
    MessageRole,
    SyncAgentSessionClient,
    TurnCompleted,
    TurnResult,
    TurnStatus,
)
from dex_agents._session.message_decode_cache import MessageDecodeCache
from dex_agents.testing import read_agent_messages, turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

FLOW_TYPE = "MessageReadsAgent"
REPLIES_PER_TURN = 149
MAP = "AGENT_MESSAGES"


def _message(sequence: int, text: str = "") -> AgentMessage:
    return AgentMessage(sequence, MessageRole.ASSISTANT, "{}", text=text or f"m{sequence}")


class _Decoder:
    """Decodes keys into messages and remembers which keys it decoded."""

    def __init__(self, text: str = "") -> None:
        self.text = text
        self.decoded: list[str] = []

    def __call__(self, key: str) -> AgentMessage:
        self.decoded.append(key)
        return _message(int(key), self.text)


def _keys(*sequences: int) -> list[str]:
    return [f"{sequence:012d}" for sequence in sequences]


def test_the_cache_decodes_only_keys_it_has_not_seen_in_the_same_run() -> None:
    cache = MessageDecodeCache()
    first = _Decoder()
    cache.read("flow-1", "run-1", MAP, _keys(1, 2), first, existing_keys=_keys(1, 2))
    second = _Decoder()
    messages = cache.read(
        "flow-1", "run-1", MAP, _keys(1, 2, 3), second, existing_keys=_keys(1, 2, 3)
    )

    assert first.decoded == _keys(1, 2)
    assert second.decoded == _keys(3)
    assert [message.sequence for message in messages.values()] == [1, 2, 3]


def test_another_run_or_flow_never_sees_the_cached_messages() -> None:
    cache = MessageDecodeCache()
    cache.read("flow-1", "run-1", MAP, _keys(1), _Decoder("old"), existing_keys=_keys(1))
    new_run = _Decoder("new run")
    other_flow = _Decoder("other flow")

    assert cache.read("flow-1", "run-2", MAP, _keys(1), new_run, existing_keys=_keys(1))[
        _keys(1)[0]
    ].text == ("new run")
    assert cache.read("flow-2", "run-1", MAP, _keys(1), other_flow, existing_keys=_keys(1))[
        _keys(1)[0]
    ].text == ("other flow")
    assert new_run.decoded == other_flow.decoded == _keys(1)


def test_each_attribute_map_keeps_its_own_keys() -> None:
    cache = MessageDecodeCache()
    cache.read("flow-1", "run-1", MAP, _keys(1), _Decoder("message"), existing_keys=_keys(1))
    chunks = _Decoder("chunk")
    read = cache.read(
        "flow-1", "run-1", "AGENT_MESSAGE_CHUNKS", _keys(1), chunks, existing_keys=_keys(1)
    )

    assert chunks.decoded == _keys(1)
    assert read[_keys(1)[0]].text == "chunk"


def test_keys_that_left_the_window_are_forgotten_and_read_keys_outside_it_kept() -> None:
    cache = MessageDecodeCache()
    cache.read("flow-1", "run-1", MAP, _keys(1, 2, 3), _Decoder(), existing_keys=_keys(1, 2, 3))
    # Key 1 moved into a chunk; a reader that decodes only key 3 keeps key 2 too.
    cache.read("flow-1", "run-1", MAP, _keys(3), _Decoder(), existing_keys=_keys(2, 3))
    again = _Decoder()
    cache.read("flow-1", "run-1", MAP, _keys(1, 2, 3), again, existing_keys=_keys(1, 2, 3))

    assert again.decoded == _keys(1)


def test_without_a_run_id_nothing_is_kept() -> None:
    cache = MessageDecodeCache()
    cache.read("flow-1", "", MAP, _keys(1), _Decoder(), existing_keys=_keys(1))
    again = _Decoder()
    cache.read("flow-1", "", MAP, _keys(1), again, existing_keys=_keys(1))

    assert again.decoded == _keys(1)


def test_the_least_recently_read_session_is_dropped_beyond_the_limit() -> None:
    cache = MessageDecodeCache(max_sessions=2)
    for flow_id in ("flow-1", "flow-2", "flow-1", "flow-3"):
        cache.read(flow_id, "run-1", MAP, _keys(1), _Decoder(), existing_keys=_keys(1))
    kept, dropped = _Decoder(), _Decoder()
    cache.read("flow-1", "run-1", MAP, _keys(1), kept, existing_keys=_keys(1))
    cache.read("flow-2", "run-1", MAP, _keys(1), dropped, existing_keys=_keys(1))

    assert kept.decoded == []
    assert dropped.decoded == _keys(1)


def _read_counting(
    cache: MessageDecodeCache, flow_id: str, *sequences: int, weight: int = 1
) -> list[str]:
    """Read the keys of ``sequences`` of one run; return the keys that had to be decoded."""
    decoder = _Decoder()
    keys = _keys(*sequences)
    cache.read(flow_id, "run-1", MAP, keys, decoder, existing_keys=keys, weigh=lambda _: weight)
    return decoder.decoded


def test_an_oversized_run_is_not_kept_and_does_not_push_others_out() -> None:
    cache = MessageDecodeCache(max_messages=3)
    _read_counting(cache, "flow-1", 1, 2)
    _read_counting(cache, "flow-2", 1)
    # One chunk of 5 messages alone exceeds the budget of 3.
    _read_counting(cache, "flow-3", 1, weight=5)

    assert _read_counting(cache, "flow-3", 1, weight=5) == _keys(1)
    assert _read_counting(cache, "flow-1", 1, 2) == []
    assert _read_counting(cache, "flow-2", 1) == []


def test_the_least_recently_read_run_goes_first_beyond_the_message_budget() -> None:
    cache = MessageDecodeCache(max_messages=3)
    _read_counting(cache, "flow-1", 1, 2)
    _read_counting(cache, "flow-2", 1)
    _read_counting(cache, "flow-1", 1, 2)
    _read_counting(cache, "flow-3", 1)

    assert _read_counting(cache, "flow-2", 1) == _keys(1)
    assert _read_counting(cache, "flow-3", 1) == []


@pytest.mark.parametrize("limit", ["max_sessions", "max_messages"])
@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_a_cache_needs_positive_limits(limit: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=f"{limit} must be a positive int"):
        MessageDecodeCache(**{limit: value})  # type: ignore[arg-type]


def _many_replies(turn: AgentTurnContext) -> AgentTurnOutcome:
    user_text = turn.messages[-1].text or ""
    replies = tuple(assistant(f"{user_text} reply {n}") for n in range(1, REPLIES_PER_TURN + 1))
    return TurnCompleted(replies, AgentUsage())


async def test_the_snapshot_returns_the_newest_200_messages_across_window_and_chunks(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_many_replies)
    # A small window: the older messages sit in chunks, the newest in the window.
    options = AgentSessionOptions(message_window_size=40, message_chunk_size=20)
    per_turn = REPLIES_PER_TURN + 1
    async with (
        swappable_worker_stack(dex_in_process_worker) as stack,
        stack.serve(AgentSessionFlow(runner, flow_type=FLOW_TYPE, options=options)) as sessions,
    ):
        await sessions.start_session("s1", "first")
        await wait_for_agent_snapshot(sessions, "s1", turn_ended(1))
        assert await sessions.send_user_message("s1", "second")
        snapshot = await wait_for_agent_snapshot(sessions, "s1", turn_ended(2))
        stored = await read_agent_messages(sessions, "s1")
        attributes = await stack.attributes("s1")

    assert attributes.instance_keys("AGENT_MESSAGE_CHUNKS")
    assert [m.sequence for m in stored] == list(range(1, 2 * per_turn + 1))
    assert snapshot.messages == tuple(stored[-200:])
    assert snapshot.messages[0].sequence == 2 * per_turn - 199
    # The second model call saw every message before it, read through the cache.
    assert [m.sequence for m in runner.model_calls[-1].messages] == list(range(1, per_turn + 2))


async def test_the_window_read_answers_list_agent_messages_page_or_nothing(
    dex_in_process_worker: InProcessWorkerFactory, tmp_path: Path
) -> None:
    """``list_recent_agent_messages`` (the turn-level calls' end read) loads only the window: it
    answers the very page ``list_agent_messages`` does, or no page where a chunk holds a message
    after the sequence asked for; ``run_turn`` then reads ``list_agent_messages``."""
    runner = ScriptedRunner(_many_replies)
    options = AgentSessionOptions(message_window_size=40, message_chunk_size=20)
    flow = AgentSessionFlow(runner, flow_type=FLOW_TYPE, options=options)
    per_turn = REPLIES_PER_TURN + 1
    async with (
        swappable_worker_stack(dex_in_process_worker) as stack,
        stack.serve(flow) as sessions,
    ):
        await sessions.start_session("s1", "first")
        await wait_for_agent_snapshot(sessions, "s1", turn_ended(1))
        client = stack.client
        assert client is not None
        outputs = record_rpc_outputs(client)
        # A turn of 150 messages, more than the window holds: the window read answers no page.
        result = await sessions.run_turn("s1", "second", timeout=60)
        window = (await stack.attributes("s1")).instance_keys("AGENT_MESSAGES")
        window_first = min(int(key) for key in window)
        flow_id = stack.scoped("s1")
        compared = 0
        for after in (None, 0, 1, 150, window_first - 2, window_first - 1, window_first, 299, 300):
            request = ListAgentMessagesRequest(after_sequence=after, limit=200)
            recent = await client.invoke_rpc(flow.list_recent_agent_messages, flow_id, request)
            full = await client.invoke_rpc(flow.list_agent_messages, flow_id, request)
            if after is not None and after >= window_first - 1:
                assert recent.page == full
                compared += 1
            else:
                assert recent.page is None
        # The synchronous client's end read falls back the same way.
        synchronous = await asyncio.to_thread(
            _sync_run_turn, flow, stack.server_address, tmp_path, stack.scoped("s1"), "third"
        )

    assert (result.status, result.text) == (
        TurnStatus.COMPLETED,
        f"second reply {REPLIES_PER_TURN}",
    )
    assert (synchronous.status, synchronous.text) == (
        TurnStatus.COMPLETED,
        f"third reply {REPLIES_PER_TURN}",
    )
    names = [name for name, _ in outputs]
    assert names[:3] == ["send_user_message", "list_recent_agent_messages", "list_agent_messages"]
    assert window_first > per_turn + 1  # the turn's first messages sit in chunks
    assert compared == 4


def _sync_run_turn(
    flow: AgentSessionFlow, server_address: str, tmp_path: Path, session_id: str, text: str
) -> TurnResult:
    registry = Registry([flow], CodecRegistry(), allow_async_handlers=True)
    cache = open_blob_cache(BlobCacheConfig(str(tmp_path / "sync-cache"), 16 * 1024 * 1024))
    options = ClientOptions(server_address=server_address, worker_target=WorkerTarget(pull=True))
    client = Client(registry, cache, options)
    try:
        return SyncAgentSessionClient(client, flow).run_turn(session_id, text, timeout=60)
    finally:
        client.close()
        cache.close()
