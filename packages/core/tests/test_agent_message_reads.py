"""What reading stored messages decodes: the decoded-message cache and the snapshot's newest 200."""

from __future__ import annotations

import pytest
from agent_session_test_support import ScriptedRunner, assistant
from compaction_test_support import swappable_worker_stack
from dex_agents import (
    AgentMessage,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    ConfigurationError,
    MessageRole,
    TurnCompleted,
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
