"""Issue 36 cases 1 and 3 through the real engine: size budgets hold end to end.

A user message too large to store is refused where it enters (the client and the RPC both return
``False``, ``start_session`` raises), a model answer too large fails only its turn, a tool result
too large fails only its call, and the snapshot and message pages stay under the RPC output limit
whatever was stored.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

import dex_agents._session.size_budgets as size_budgets
import pytest
from agent_session_test_support import (
    ScriptedRunner,
    SessionStack,
    assistant,
    final_answer_with_results,
    request_tools,
    running_session_stack,
    tool_call,
)
from compaction_test_support import CompactingScriptedRunner
from dex import (
    BlobCacheConfig,
    Client,
    ClientOptions,
    FlowStatus,
    Registry,
    WorkerTarget,
    open_blob_cache,
)
from dex_agents import (
    CUT_TEXT_MARKER,
    MAX_RPC_OUTPUT_BYTES,
    MAX_STORED_MESSAGE_BYTES,
    TOOL_RESULT_TOO_LARGE_ERROR_PREFIX,
    AgentInterrupt,
    AgentMessage,
    AgentPlan,
    AgentSessionOptions,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentTodo,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    AgentUserMessage,
    AnswerQuestionRequest,
    CompactionPolicy,
    ConfigurationError,
    ContextSummary,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolExecution,
    InterruptKind,
    MessageRole,
    PlanStatus,
    QueuedUserMessage,
    ResolveInterruptRequest,
    SteerUserMessageRequest,
    SyncAgentSessionClient,
    TodoStatus,
    ToolEffect,
    ToolExecutionResult,
    ToolInputRequested,
    ToolPolicy,
    TurnCompleted,
    agent_codec_registry,
)
from dex_agents._session.message_layout import encoded_json_size
from dex_agents._session.size_budgets import fit_snapshot, tool_result_problem
from dex_agents.testing import read_agent_message_pages, turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

# The probes: each was accepted and then failed the whole session.
OVERSIZED_TEXTS = {
    "2 MB ASCII": "a" * 2_000_000,
    "1.05 MB CJK": "会" * 350_000,
    "720 KB emoji": "😀" * 180_000,
}


def _echo(turn: AgentTurnContext) -> AgentTurnOutcome:
    return TurnCompleted((assistant(f"echo {len(turn.messages[-1].text or '')}"),), AgentUsage())


async def _running_after_first_turn(stack: SessionStack, session_id: str) -> None:
    await stack.sessions.start_session(session_id, "hi")
    await wait_for_agent_snapshot(stack.sessions, session_id, turn_ended(1))


async def _still_works(stack: SessionStack, session_id: str, turns: int) -> AgentSnapshot:
    """The session takes another message and completes its turn: nothing broke it."""
    assert await stack.sessions.send_user_message(session_id, "still there?")
    snapshot = await wait_for_agent_snapshot(stack.sessions, session_id, turn_ended(turns))
    assert snapshot.messages[-1].text == f"echo {len('still there?')}"
    return snapshot


async def test_oversized_user_messages_are_refused_where_they_enter(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async with running_session_stack(dex_in_process_worker, ScriptedRunner(_echo)) as stack:
        await _running_after_first_turn(stack, "s")
        for name, text in OVERSIZED_TEXTS.items():
            assert not await stack.sessions.send_user_message("s", text), name
            assert not await stack.sessions.steer_user_message("s", text), name
            # Past the client's check, the RPC itself refuses it and stores nothing.
            raw = await stack.client.invoke_rpc(
                stack.flow.send_user_message, stack.dex.scoped("s"), AgentUserMessage(text)
            )
            assert raw is False, name
            raw = await stack.client.invoke_rpc(
                stack.flow.steer_user_message,
                stack.dex.scoped("s"),
                SteerUserMessageRequest(text=text),
            )
            assert raw is False, name
        snapshot = await stack.sessions.get_agent_snapshot("s")
        assert snapshot.queued_messages == () and snapshot.steered_messages == ()
        assert len(snapshot.messages) == 2
        await _still_works(stack, "s", 2)
        # A large message that fits is stored whole.
        fits = "b" * 400_000
        assert await stack.sessions.send_user_message("s", fits)
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(3))
        assert snapshot.messages[-2].text == fits


async def test_an_oversized_initial_message_never_fails_the_session(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async with running_session_stack(dex_in_process_worker, ScriptedRunner(_echo)) as stack:
        text = OVERSIZED_TEXTS["2 MB ASCII"]
        with pytest.raises(ConfigurationError, match="initial_message cannot be stored"):
            await stack.sessions.start_session("s", text)
        # Past the client's check the session starts without the turn and says why.
        await stack.client.start_flow(
            stack.flow, stack.dex.scoped("raw"), AgentSessionStartInput(text)
        )
        snapshot = await wait_for_agent_snapshot(
            stack.sessions, "raw", lambda snapshot: snapshot if snapshot.state else None
        )
        assert snapshot.state is not None and snapshot.messages == ()
        assert str(snapshot.state.last_turn_error).startswith("initial the message is")
        assert "over the limit of 1048576 bytes" in str(snapshot.state.last_turn_error)
        await _still_works(stack, "raw", 1)


def _huge_answer_once(turn: AgentTurnContext) -> AgentTurnOutcome:
    if turn.turn_id == "turn-2":
        return TurnCompleted((assistant("z" * 1_500_000),), AgentUsage())
    return _echo(turn)


async def test_an_oversized_model_answer_fails_its_turn_not_the_session(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_huge_answer_once)
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        await _running_after_first_turn(stack, "s")
        assert await stack.sessions.send_user_message("s", "say a lot")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(2))
        assert snapshot.state is not None
        error = str(snapshot.state.last_turn_error)
        assert error.startswith("the model's answer is too large to store: its message 1 is")
        # Failed at once: one model call for the turn, no retry of the same answer.
        assert [turn.turn_id for turn in runner.model_calls].count("turn-2") == 1
        assert snapshot.messages[-1].text == "say a lot"
        await _still_works(stack, "s", 3)
        info = await stack.client.describe_flow(stack.dex.scoped("s"))
        assert info.status is FlowStatus.RUNNING


def _fetch_then_answer(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        return request_tools(turn, tool_call(turn, "c1", "fetch", {}))
    return final_answer_with_results(turn)


async def _fetch_huge(call: DeferredToolExecution) -> ToolExecutionResult:
    return ToolExecutionResult("p" * 600_000)


async def test_an_oversized_tool_result_fails_its_call_not_the_turn(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_fetch_then_answer, {"fetch": _fetch_huge})
    options = AgentSessionOptions(tool_policies={"fetch": ToolPolicy(ToolEffect.READ)})
    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        await stack.sessions.start_session("s", "fetch the page")
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert snapshot.state is not None and snapshot.state.last_turn_error is None
        resumed = runner.model_calls[-1]
        record = resumed.tool_calls["c1"]
        assert record.status is AgentToolCallStatus.FAILED
        assert str(record.error).startswith(TOOL_RESULT_TOO_LARGE_ERROR_PREFIX)
        assert "its result is 600002 bytes, over the limit of 262144 bytes" in str(record.error)
        # The tool ran once: a too-large result is not retried.
        assert len(runner.tool_calls) == 1
        assert "fetch=" in str(snapshot.messages[-1].text)


def test_characters_outside_the_bmp_are_measured_as_stored() -> None:
    # 30,000 emoji are 360,002 bytes as a JSON string (each escaped as a surrogate pair), though
    # 30,000 characters of up to 6 bytes would be within the 256 KiB budget.
    problem = tool_result_problem("😀" * 30_000)
    assert problem is not None and "its result is 360002 bytes" in problem
    assert tool_result_problem(_LARGEST_EMOJI_REPLY) is None


async def test_snapshot_and_pages_stay_under_the_rpc_limit(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async with running_session_stack(dex_in_process_worker, ScriptedRunner(_echo)) as stack:
        await _running_after_first_turn(stack, "s")
        # Each stored message is just under its budget: text plus a framework item repeating it.
        big = "m" * (MAX_STORED_MESSAGE_BYTES // 2 - 1024)
        for turn in range(2, 6):
            assert await stack.sessions.send_user_message("s", big)
            await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(turn))
        snapshot = await stack.sessions.get_agent_snapshot("s")
        assert encoded_json_size(snapshot) <= MAX_RPC_OUTPUT_BYTES
        assert snapshot.messages[-1].text == f"echo {len(big)}"
        assert snapshot.messages[-2].text == big
        # The newest messages that fit, without a gap, and fewer than everything stored.
        sequences = [message.sequence for message in snapshot.messages]
        assert sequences == list(range(sequences[0], 11)) and sequences[0] > 1
        # Pages by bytes as well as by count: every message exactly once, each page in budget.
        pages = await read_agent_message_pages(stack.sessions, "s")
        for page in pages:
            assert encoded_json_size(page) <= MAX_RPC_OUTPUT_BYTES
            assert page.messages
        assert [m.sequence for page in pages for m in page.messages] == list(range(1, 11))
        await _still_works(stack, "s", 6)


async def test_a_message_stored_before_the_budgets_still_reads(
    dex_in_process_worker: InProcessWorkerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_session_stack(dex_in_process_worker, ScriptedRunner(_echo)) as stack:
        await _running_after_first_turn(stack, "s")
        # An earlier release stored any message the engine took: 3.4 MB as stored.
        monkeypatch.setattr(size_budgets, "MAX_STORED_MESSAGE_BYTES", 8 * 1024 * 1024)
        old = "o" * 1_700_000
        assert await stack.sessions.send_user_message("s", old)
        await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(2))
        monkeypatch.undo()
        snapshot = await stack.sessions.get_agent_snapshot("s")
        assert encoded_json_size(snapshot) <= MAX_RPC_OUTPUT_BYTES
        assert snapshot.messages[-1].text == f"echo {len(old)}"
        page = await stack.sessions.list_agent_messages("s", after_sequence=2)
        assert [message.sequence for message in page.messages] == [3]
        cut = page.messages[0]
        assert str(cut.text).endswith(CUT_TEXT_MARKER) and str(cut.text).startswith("ooo")
        assert page.next_after_sequence == 3
        page = await stack.sessions.list_agent_messages("s", after_sequence=3)
        assert [message.sequence for message in page.messages] == [4]
        await _still_works(stack, "s", 3)


def _many_fetches_and_a_refund(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        calls = [tool_call(turn, f"f{index}", "fetch", {}) for index in range(16)]
        return request_tools(turn, *calls, tool_call(turn, "r1", "refund", {}))
    return TurnCompleted((assistant("done"),), AgentUsage())


async def _fetch_large(call: DeferredToolExecution) -> ToolExecutionResult:
    return ToolExecutionResult("q" * 250_000)  # within MAX_TOOL_RESULT_BYTES each


async def test_the_snapshot_of_a_turn_with_many_large_tool_results_fits(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_many_fetches_and_a_refund, {"fetch": _fetch_large})
    options = AgentSessionOptions(
        tool_policies={
            "fetch": ToolPolicy(ToolEffect.READ),
            "refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True),
        }
    )

    def fetched_and_waiting(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        done = [r for r in snapshot.tool_calls if r.status is AgentToolCallStatus.SUCCEEDED]
        return snapshot if snapshot.pending_interrupts and len(done) == 16 else None

    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        await stack.sessions.start_session("s", "fetch everything, then refund")
        # 16 results of 250 KB are 4 MB: the snapshot cuts each call's output to fit.
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", fetched_and_waiting)
        assert encoded_json_size(snapshot) <= MAX_RPC_OUTPUT_BYTES
        outputs = [r.output or "" for r in snapshot.tool_calls if r.tool_name == "fetch"]
        assert all(o.startswith("qqq") and o.endswith(CUT_TEXT_MARKER) for o in outputs)
        # The stored records keep their whole output: the approval still works end to end.
        assert await stack.sessions.resolve_interrupt("s", "r1", approved=False)
        await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert all(
            len(record.output or "") == 250_000
            for record in runner.model_calls[-1].tool_calls.values()
            if record.tool_name == "fetch"
        )


async def test_the_sync_client_refuses_what_the_session_cannot_store(
    tmp_path: Path, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    async with running_session_stack(dex_in_process_worker, ScriptedRunner(_echo)) as stack:
        await _running_after_first_turn(stack, "s")
        registry = Registry([stack.flow], agent_codec_registry(), allow_async_handlers=True)
        cache = open_blob_cache(BlobCacheConfig(str(tmp_path / "sync-cache"), 16 * 1024 * 1024))
        options = ClientOptions(
            server_address=stack.server_address, worker_target=WorkerTarget(pull=True)
        )
        client = Client(registry, cache, options)
        try:
            sessions = SyncAgentSessionClient(client, stack.flow)
            for text in [*OVERSIZED_TEXTS.values(), "caf\ud800e"]:
                assert not await asyncio.to_thread(sessions.send_user_message, "s", text)
            with pytest.raises(ConfigurationError, match="initial_message cannot be stored"):
                await asyncio.to_thread(sessions.start_session, "t", "a" * 2_000_000)
            assert not await asyncio.to_thread(
                lambda: sessions.resolve_interrupt(
                    "s", "none", approved=False, rejection_message="r" * 300_000
                )
            )
        finally:
            client.close()
            cache.close()
        assert (await stack.sessions.get_agent_snapshot("s")).queued_messages == ()
        await _still_works(stack, "s", 2)


def _many_questions(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        return request_tools(turn, *(tool_call(turn, f"a{n}", "ask", {}) for n in range(16)))
    return final_answer_with_results(turn)


_LONG_QUESTION = "Which of these? " + "w" * 200_000
"""Within the budget of one tool question (``MAX_TOOL_RESULT_BYTES``), 16 of them are 3.2 MB."""


async def _ask_long(call: DeferredToolExecution) -> ToolExecutionResult | ToolInputRequested:
    if not call.input_answers:
        return ToolInputRequested(_LONG_QUESTION, choices=("c" * 20_000, "d"))
    return ToolExecutionResult(f"answered {call.input_answers[-1].answer}")


async def test_the_snapshot_of_many_large_pending_questions_fits(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_many_questions, {"ask": _ask_long})  # type: ignore[dict-item]
    options = AgentSessionOptions(tool_policies={"ask": ToolPolicy(ToolEffect.READ)})

    def all_asked(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        return snapshot if len(snapshot.pending_interrupts) == 16 else None

    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        await stack.sessions.start_session("s", "ask me everything")
        # The questions are in the pending interrupts and in the records: 7 MB stored.
        snapshot = await wait_for_agent_snapshot(stack.sessions, "s", all_asked)
        assert encoded_json_size(snapshot) <= MAX_RPC_OUTPUT_BYTES
        ids = sorted(interrupt.interrupt_id for interrupt in snapshot.pending_interrupts)
        assert ids == sorted(f"a{n}-input-1" for n in range(16))
        for interrupt in snapshot.pending_interrupts:
            assert str(interrupt.question).startswith("Which of these? www")
            assert str(interrupt.question).endswith(CUT_TEXT_MARKER)
            assert interrupt.choices[0].endswith(CUT_TEXT_MARKER) and interrupt.choices[1] == "d"
        for record in snapshot.tool_calls:
            assert str(record.question).endswith(CUT_TEXT_MARKER)
        # Each question is still answered by its ID; the tools see their whole questions.
        for interrupt in snapshot.pending_interrupts:
            assert await stack.sessions.answer_question("s", interrupt.interrupt_id, "d")
        final = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
        assert final.state is not None and final.state.last_turn_error is None
        assert final.messages[-1].text == "; ".join(["ask=answered d"] * 16)
        asked = [
            answer.question
            for record in runner.model_calls[-1].tool_calls.values()
            for answer in record.input_answers
        ]
        assert asked == [_LONG_QUESTION] * 16


def test_the_snapshot_cuts_interrupts_summary_and_plan_whatever_was_stored() -> None:
    # Each part alone is within what the session can store; together they are 8 MB.
    approvals = tuple(
        AgentInterrupt(
            interrupt_id=f"w{n}",
            tool_call_id=f"w{n}",
            tool_name="write",
            kind=InterruptKind.APPROVAL,
            arguments=json.dumps({"body": "a" * 200_000}),
        )
        for n in range(8)
    )
    plan = AgentPlan(
        revision=7,
        status=PlanStatus.ACTIVE,
        todos=tuple(AgentTodo(f"step {n} " + "p" * 40, TodoStatus.PENDING) for n in range(20_000)),
    )
    summary = ContextSummary(generation=3, first_sequence=1, last_sequence=40, text="s" * 2_000_000)
    queued = tuple(QueuedUserMessage(f"q{n}", "u" * 400_000) for n in range(3))
    messages = tuple(
        AgentMessage(sequence=n, role=MessageRole.USER, framework_item="{}", text=f"m{n}")
        for n in range(1, 21)
    )
    snapshot = AgentSnapshot(
        messages=messages,
        pending_interrupts=approvals,
        plan=plan,
        context_summary=summary,
        queued_messages=queued,
        queued_message_count=3,
    )
    assert encoded_json_size(snapshot) > 2 * MAX_RPC_OUTPUT_BYTES

    fitted = fit_snapshot(snapshot)

    assert encoded_json_size(fitted) <= MAX_RPC_OUTPUT_BYTES
    assert fitted.messages == messages  # small messages are never given up for the rest
    assert [i.interrupt_id for i in fitted.pending_interrupts] == [f"w{n}" for n in range(8)]
    assert all(str(i.arguments).endswith(CUT_TEXT_MARKER) for i in fitted.pending_interrupts)
    assert fitted.context_summary is not None
    assert fitted.context_summary.text.startswith("sss")
    assert fitted.context_summary.text.endswith(CUT_TEXT_MARKER)
    assert fitted.context_summary.last_sequence == 40
    assert fitted.plan is not None and (fitted.plan.revision, fitted.plan.status) == (7, "active")
    assert 0 < len(fitted.plan.todos) < 20_000
    assert fitted.plan.todos[0].content.startswith("step 0 ")
    assert fitted.plan.todos[-1].content.endswith(CUT_TEXT_MARKER)
    assert [q.message_id for q in fitted.queued_messages] == ["q0"]
    assert fitted.queued_message_count == 3


def test_a_small_snapshot_is_returned_whole() -> None:
    plan = AgentPlan(1, PlanStatus.DRAFT, tuple(AgentTodo(f"t{n}") for n in range(50)))
    snapshot = AgentSnapshot(plan=plan, context_summary=ContextSummary(1, 1, 4, "short"))
    assert fit_snapshot(snapshot) is snapshot


def _ask_and_refund(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        return request_tools(
            turn, tool_call(turn, "q1", "ask_free", {}), tool_call(turn, "r1", "refund", {})
        )
    return final_answer_with_results(turn)


async def _ask_free(call: DeferredToolExecution) -> ToolExecutionResult | ToolInputRequested:
    if not call.input_answers:
        return ToolInputRequested("Why?")
    return ToolExecutionResult(f"told {len(call.input_answers[-1].answer or '')} characters")


# Over MAX_TOOL_RESULT_BYTES as stored: ASCII by its length, emoji by its escapes (12 bytes each);
# and a lone surrogate, which no stored text may hold.
REFUSED_REPLIES = {
    "300 KB ASCII": "a" * 300_000,
    "30,000 emoji": "😀" * 30_000,
    "a lone surrogate": json.loads('"caf\\ud800e"'),
}
_LARGEST_EMOJI_REPLY = "😀" * 20_000
"""240,002 bytes as stored: just within the budget."""


async def test_refused_answers_and_rejections_leave_the_interrupts_pending(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_ask_and_refund, {"ask_free": _ask_free})  # type: ignore[dict-item]
    options = AgentSessionOptions(
        tool_policies={
            "ask_free": ToolPolicy(ToolEffect.READ),
            "refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True),
        }
    )

    def both_pending(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        return snapshot if len(snapshot.pending_interrupts) == 2 else None

    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        await stack.sessions.start_session("s", "ask, then refund")
        await wait_for_agent_snapshot(stack.sessions, "s", both_pending)
        for name, text in REFUSED_REPLIES.items():
            assert not await stack.sessions.answer_question("s", "q1-input-1", text), name
            assert not await stack.sessions.resolve_interrupt(
                "s", "r1", approved=False, rejection_message=text
            ), name
            # Past the client's check, the RPCs themselves refuse them and resolve nothing.
            raw = await stack.client.invoke_rpc(
                stack.flow.answer_question,
                stack.dex.scoped("s"),
                AnswerQuestionRequest("q1-input-1", text),
            )
            assert raw is False, name
            raw = await stack.client.invoke_rpc(
                stack.flow.resolve_interrupt,
                stack.dex.scoped("s"),
                ResolveInterruptRequest("r1", approved=False, rejection_message=text),
            )
            assert raw is False, name
        snapshot = await stack.sessions.get_agent_snapshot("s")
        assert sorted(i.interrupt_id for i in snapshot.pending_interrupts) == ["q1-input-1", "r1"]
        # Within the budget both go through, and the tool and the model see them whole.
        assert await stack.sessions.answer_question("s", "q1-input-1", _LARGEST_EMOJI_REPLY)
        assert await stack.sessions.resolve_interrupt(
            "s", "r1", approved=False, rejection_message=_LARGEST_EMOJI_REPLY
        )
        final = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
    assert final.state is not None and final.state.last_turn_error is None
    assert final.messages[-1].text == (
        f"ask_free=told {len(_LARGEST_EMOJI_REPLY)} characters; "
        f"refund=The user rejected this tool call. Reason: {_LARGEST_EMOJI_REPLY}"
    )


@dataclass
class _OneHugeSummaryRunner(CompactingScriptedRunner):
    """Its first summary is over the stored-message budget; later ones are the usual."""

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        normal = await super().summarize_context(request)
        if len(self.summary_requests) == 1:
            return ContextSummaryResult("z" * 1_100_000, normal.usage)
        return normal


async def test_an_oversized_context_summary_fails_its_turn_not_the_session(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = _OneHugeSummaryRunner(_echo)
    options = AgentSessionOptions(
        compaction=CompactionPolicy(context_window_tokens=200),
        message_window_size=4,
        message_chunk_size=2,
    )
    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        await _running_after_first_turn(stack, "s")
        turn = 1
        while not runner.summary_requests:
            turn += 1
            assert turn < 20, "compaction never ran"
            assert await stack.sessions.send_user_message("s", f"message {turn}")
            snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(turn))
        assert snapshot.state is not None
        assert str(snapshot.state.last_turn_error).startswith(
            "the context summary is too large to store: it is 1100002 bytes as stored"
        )
        assert snapshot.context_summary is None and len(runner.summary_requests) == 1
        # The next turn summarizes again, stores that summary and completes.
        snapshot = await _still_works(stack, "s", turn + 1)
        assert snapshot.context_summary is not None
        assert snapshot.context_summary.text.startswith("summary of ")
        info = await stack.client.describe_flow(stack.dex.scoped("s"))
        assert info.status is FlowStatus.RUNNING
