"""The pure rules of built-in calls, tool questions, and tool tasks."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from dex_agents import (
    AgentInterrupt,
    AgentToolCall,
    AgentToolCallStatus,
    AnswerQuestionRequest,
    InteractionMode,
    InterruptKind,
    QuestionResolution,
    ToolEffect,
    ToolInputRequested,
    describe_tool_call_outcome,
)
from dex_agents._session.built_in_transitions import (
    apply_question_resolution,
    decide_question_answer,
    is_question_raised,
    raise_tool_question,
    record_tool_question,
    settle_requested_calls,
    task_poll_interval_seconds,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _record(call_id: str, name: str, arguments: str = "{}") -> AgentToolCall:
    return AgentToolCall(
        call_id,
        name,
        arguments,
        ToolEffect.UNCLASSIFIED,
        True,
        AgentToolCallStatus.AWAITING_APPROVAL,
        "turn-1",
        0,
    )


def _settle(
    *records: AgentToolCall, mode: InteractionMode = InteractionMode.CHAT
) -> list[AgentToolCall]:
    settlements = settle_requested_calls(
        records,
        enabled_built_in_tools={"ask_user", "durable_wait", "write_todos"},
        interaction_mode=mode,
        plan=None,
        max_durable_wait=timedelta(hours=1),
        interrupt_deadline=timedelta(minutes=5),
        now=NOW,
    )
    return [settlement.record for settlement in settlements]


def test_poll_intervals_round_up_to_whole_seconds_within_a_day() -> None:
    assert [task_poll_interval_seconds(s) for s in (0.01, 1, 1.5, 10**9)] == [1, 1, 2, 86400]


def test_built_in_calls_get_the_read_effect_without_approval() -> None:
    ask, other = _settle(_record("a", "ask_user", '{"question": "Why?"}'), _record("b", "search"))
    assert (ask.effect, ask.requires_approval, ask.status) == (
        ToolEffect.READ,
        False,
        AgentToolCallStatus.AWAITING_ANSWER,
    )
    assert other.status is AgentToolCallStatus.AWAITING_APPROVAL  # untouched


def test_ask_user_raises_its_question_under_the_tool_call_id() -> None:
    settlements = settle_requested_calls(
        [_record("a", "ask_user", '{"question": "Why?", "choices": null}')],
        enabled_built_in_tools={"ask_user"},
        interaction_mode=InteractionMode.CHAT,
        plan=None,
        max_durable_wait=timedelta(hours=1),
        interrupt_deadline=timedelta(minutes=5),
        now=NOW,
    )
    (settlement,) = settlements
    interrupt = settlement.interrupt
    assert interrupt is not None
    assert (interrupt.interrupt_id, interrupt.kind, interrupt.deadline) == (
        "a",
        InterruptKind.QUESTION,
        NOW + timedelta(minutes=5),
    )


def test_a_planning_turn_rejects_every_other_call() -> None:
    todos = '{"todos": [{"content": "Back up", "status": "pending"}]}'
    plan_call, other = _settle(
        _record("t", "write_todos", todos), _record("s", "search"), mode=InteractionMode.PLANNING
    )
    assert plan_call.status is AgentToolCallStatus.SUCCEEDED
    assert other.status is AgentToolCallStatus.REJECTED
    assert describe_tool_call_outcome(other) == (
        "The tool call was not run: a planning turn can only call write_todos."
    )


def test_durable_wait_records_its_wait_until() -> None:
    (wait,) = _settle(_record("w", "durable_wait", '{"duration_seconds": 90, "reason": "ci"}'))
    assert (wait.status, wait.wait_until, wait.wait_reason) == (
        AgentToolCallStatus.WAITING_FOR_TIMER,
        NOW + timedelta(seconds=90),
        "ci",
    )


def _question_interrupt(**changes: object) -> AgentInterrupt:
    interrupt = AgentInterrupt(
        "q", "a", "ask_user", InterruptKind.QUESTION, choices=("eu", "us"), allows_free_text=False
    )
    return replace(interrupt, **changes)  # type: ignore[arg-type]


def test_answer_question_refuses_what_the_seed_refuses() -> None:
    pending = [_question_interrupt()]

    def answers(answer: str, interrupts: list[AgentInterrupt] = pending) -> bool:
        request = AnswerQuestionRequest("q", answer)
        return decide_question_answer(interrupts, request, NOW).resolution is not None

    assert answers("eu")
    assert not answers("asia")
    assert not answers(" ")
    assert not answers("eu", [])
    assert not answers("eu", [_question_interrupt(kind=InterruptKind.APPROVAL)])
    assert not answers("eu", [_question_interrupt(deadline=NOW)])
    decision = decide_question_answer(pending, AnswerQuestionRequest("q", "us"), NOW)
    assert decision.remaining_interrupts == ()
    assert decision.resolution is not None and decision.resolution.answer == "us"


def test_a_tool_question_is_numbered_and_refused_on_a_colliding_id() -> None:
    asking = record_tool_question(
        replace(_record("c", "ship"), status=AgentToolCallStatus.APPROVED),
        ToolInputRequested("Ship?", continuation="r-1"),
    )
    assert not is_question_raised(asking)
    raised, interrupt = raise_tool_question(asking, [], [], now=NOW, deadline_after=None)
    assert interrupt is not None and interrupt.interrupt_id == "c-input-1"
    assert is_question_raised(raised)
    failed, none = raise_tool_question(asking, [], ["c-input-1"], now=NOW, deadline_after=None)
    assert none is None and failed.status is AgentToolCallStatus.FAILED


def test_resolutions_route_by_who_asked() -> None:
    asking = replace(
        record_tool_question(_record("c", "ship"), ToolInputRequested("Ship?")), question_count=1
    )
    declined = apply_question_resolution(
        asking, "c-input-1", QuestionResolution.DECLINED, None, is_ask_user=False
    )
    assert declined.status is AgentToolCallStatus.REJECTED
    assert describe_tool_call_outcome(declined) == "The user declined to answer."
    answered = apply_question_resolution(
        asking, "c-input-1", QuestionResolution.ANSWERED, "yes", is_ask_user=False
    )
    assert answered.status is AgentToolCallStatus.APPROVED
    assert answered.input_answers[-1].answer == "yes"
    task = apply_question_resolution(
        replace(asking, task_id="job"),
        "c-input-1",
        QuestionResolution.DEADLINE_PASSED,
        None,
        is_ask_user=False,
    )
    assert (task.status, task.task_answer_pending) == (AgentToolCallStatus.WAITING_FOR_TASK, True)
