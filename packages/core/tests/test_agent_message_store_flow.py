"""Chunked message storage through the real engine: rollover, chunk limits, the old layout."""

from __future__ import annotations

from agent_session_test_support import ScriptedRunner, assistant
from compaction_test_support import swappable_worker_stack
from dex_agents import (
    AGENT_MESSAGE_INDEX,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    TurnCompleted,
)
from dex_agents.testing import read_agent_messages, turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

FLOW_TYPE = "StorageAgent"


def _reply(turn: AgentTurnContext) -> AgentTurnOutcome:
    user_text = turn.messages[-1].text or ""
    return TurnCompleted((assistant(f"reply to {user_text}"),), AgentUsage())


async def _run_turns(sessions: AgentSessionClient, session_id: str, first: int, last: int) -> None:
    for number in range(first, last + 1):
        if number == 1:
            await sessions.start_session(session_id, "message 1")
        else:
            assert await sessions.send_user_message(session_id, f"message {number}")
        await wait_for_agent_snapshot(sessions, session_id, turn_ended(number))


def _expected_texts(turns: int) -> list[str]:
    return [text for n in range(1, turns + 1) for text in (f"message {n}", f"reply to message {n}")]


async def test_the_window_rolls_over_into_chunks_that_read_back_in_order(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_reply)
    options = AgentSessionOptions(message_window_size=4, message_chunk_size=3)
    async with (
        swappable_worker_stack(dex_in_process_worker) as stack,
        stack.serve(AgentSessionFlow(runner, flow_type=FLOW_TYPE, options=options)) as sessions,
    ):
        await _run_turns(sessions, "s1", 1, 8)
        attributes = await stack.attributes("s1")
        snapshot = await sessions.get_agent_snapshot("s1")
        pages = await read_agent_messages(sessions, "s1", limit=5)

    # The window holds the newest messages, one instance each; older ones sit in chunks of 3.
    window = attributes.instance_keys("AGENT_MESSAGES")
    chunks = attributes.instance_keys("AGENT_MESSAGE_CHUNKS")
    assert 1 <= len(window) <= 4
    assert chunks == ["000000000001", "000000000004", "000000000007", "000000000010"][: len(chunks)]
    assert len(chunks) >= 3
    index = attributes.json_of(AGENT_MESSAGE_INDEX.name)
    assert isinstance(index, dict)
    assert index["first_sequence"] == 1
    assert index["window_first_sequence"] == 3 * len(chunks) + 1
    assert [entry["first_sequence"] for entry in index["chunks"]] == [int(key) for key in chunks]
    assert window[0] == f"{index['window_first_sequence']:012d}"

    # Readers see one ordered transcript, whatever the layout.
    assert [m.text for m in snapshot.messages] == _expected_texts(8)
    assert [m.sequence for m in pages] == list(range(1, 17))
    assert snapshot.deleted_before_sequence is None
    # The last model call saw every message before its reply.
    assert [m.sequence for m in runner.model_calls[-1].messages] == list(range(1, 16))


async def test_a_message_larger_than_a_chunk_goes_straight_into_its_own_chunk(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    big = "x" * 6_000

    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        text = turn.messages[-1].text or ""
        return TurnCompleted(
            (assistant(big if text == "big please" else f"ok {text}"),), AgentUsage()
        )

    options = AgentSessionOptions(message_window_size=8, message_chunk_max_bytes=4_000)
    async with swappable_worker_stack(dex_in_process_worker) as stack:
        flow = AgentSessionFlow(ScriptedRunner(script), flow_type=FLOW_TYPE, options=options)
        async with stack.serve(flow) as sessions:
            await sessions.start_session("s1", "hello")
            await wait_for_agent_snapshot(sessions, "s1", turn_ended(1))
            assert await sessions.send_user_message("s1", "big please")
            snapshot = await wait_for_agent_snapshot(sessions, "s1", turn_ended(2))
            attributes = await stack.attributes("s1")

    # The big reply (sequence 4) skipped the window: its own chunk, written by its own Step.
    assert attributes.instance_keys("AGENT_MESSAGE_CHUNKS") == ["000000000004"]
    assert attributes.instance_keys("AGENT_MESSAGES") == [f"{n:012d}" for n in (1, 2, 3)]
    index = attributes.json_of(AGENT_MESSAGE_INDEX.name)
    assert isinstance(index, dict)
    assert index["chunks"] == [{"first_sequence": 4, "last_sequence": 4}]
    assert index["window_first_sequence"] == 1
    assert [m.text for m in snapshot.messages] == ["hello", "ok hello", "big please", big]


async def test_a_session_in_the_old_single_window_layout_reads_and_moves_over(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async with swappable_worker_stack(dex_in_process_worker) as stack:
        # A window too large to ever roll over stores every message in AgentMessages with no
        # index: the layout dex-agents 0.1.0 wrote.
        old_flow = AgentSessionFlow(
            ScriptedRunner(_reply),
            flow_type=FLOW_TYPE,
            options=AgentSessionOptions(message_window_size=10_000),
        )
        async with stack.serve(old_flow) as sessions:
            await _run_turns(sessions, "s1", 1, 12)
        old = await stack.attributes("s1")
        assert len(old.instance_keys("AGENT_MESSAGES")) == 24
        assert old.instance_keys("AGENT_MESSAGE_CHUNKS") == []
        assert old.json_of(AGENT_MESSAGE_INDEX.name) is None

        runner = ScriptedRunner(_reply)
        new_flow = AgentSessionFlow(
            runner,
            flow_type=FLOW_TYPE,
            options=AgentSessionOptions(message_window_size=2, message_chunk_size=2),
        )
        async with stack.serve(new_flow) as sessions:
            before = await sessions.get_agent_snapshot("s1")
            assert [m.text for m in before.messages] == _expected_texts(12)
            await _run_turns(sessions, "s1", 13, 13)
            moved_once = await stack.attributes("s1")
            await _run_turns(sessions, "s1", 14, 16)
            after = await stack.attributes("s1")
            pages = await read_agent_messages(sessions, "s1", limit=7)

    # Each storing Step moves at most 4 chunks: turn 13 stores twice (user message, reply).
    assert len(moved_once.instance_keys("AGENT_MESSAGE_CHUNKS")) == 8
    assert len(moved_once.instance_keys("AGENT_MESSAGES")) == 26 - 16
    assert len(after.instance_keys("AGENT_MESSAGES")) <= 2
    assert [m.text for m in pages] == _expected_texts(16)
    assert [m.sequence for m in runner.model_calls[-1].messages] == list(range(1, 32))


async def test_a_message_too_large_to_store_fails_its_own_turn(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    # Text and framework item each hold the reply, so 2.5 MB of text is a 5 MB message: over
    # MAX_STORED_MESSAGE_BYTES (and the server's value limit). 300 KB of text (600 KB) is over
    # this Flow type's 256 KiB chunk limit but within the budget.
    sizes = {"huge": 2_500_000, "large": 300_000}

    def script(turn: AgentTurnContext) -> AgentTurnOutcome:
        text = turn.messages[-1].text or ""
        return TurnCompleted((assistant("z" * sizes.get(text, 3)),), AgentUsage())

    runner = ScriptedRunner(script)
    options = AgentSessionOptions(message_chunk_max_bytes=256 * 1024)
    async with swappable_worker_stack(dex_in_process_worker) as stack:
        flow = AgentSessionFlow(runner, flow_type=FLOW_TYPE, options=options)
        async with stack.serve(flow) as sessions:
            await sessions.start_session("s1", "huge")
            failed = await wait_for_agent_snapshot(sessions, "s1", turn_ended(1), timeout=120)
            assert await sessions.send_user_message("s1", "large")
            stored = await wait_for_agent_snapshot(sessions, "s1", turn_ended(2), timeout=120)
            attributes = await stack.attributes("s1")

    # The oversized reply is measured as stored before anything is written: its turn fails.
    assert failed.state is not None
    assert (failed.state.last_turn_error or "").startswith(
        "the model's answer is too large to store: its message 1 is"
    )
    assert [m.text for m in failed.messages] == ["huge"]
    # At once: a retry cannot make the answer fit.
    assert len([t for t in runner.model_calls if t.turn_id == "turn-1"]) == 1
    # A reply over the chunk limit but within the budget is stored in a chunk of its own.
    assert stored.state is not None and stored.state.last_turn_error is None
    assert [len(m.text or "") for m in stored.messages] == [4, 5, 300_000]
    assert attributes.instance_keys("AGENT_MESSAGE_CHUNKS") == ["000000000003"]
