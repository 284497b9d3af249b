"""Plans: write_todos revisions and results, plan notes, plan execution keys and acceptance."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from dex_agents import (
    AgentPlan,
    AgentStatus,
    AgentTodo,
    ConfigurationError,
    ExecutePlanRequest,
    InteractionMode,
    PlanExecutionRequest,
    PlanStatus,
    TodoStatus,
    build_plan_note,
    plan_execution_key,
)
from dex_agents._events import PlanUpdatedPayload, encode_event_payload, event_payload_fields
from dex_agents._plans import (
    PLANNING_TURN_TOOL_REJECTION,
    PlanExecutionState,
    accepts_plan_execution,
    approve_plan,
    is_current_plan_approval,
    plan_execution_message,
    plan_execution_refusal,
    planning_turn_allows_tool,
    turn_interaction_mode,
    write_todos_plan,
    write_todos_result,
)

PENDING = AgentTodo("Back up the database", TodoStatus.PENDING)
RUNNING = AgentTodo("Run the migration", TodoStatus.IN_PROGRESS)
DONE = AgentTodo("Announce the window", TodoStatus.COMPLETED)
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


# write_todos revisions


def test_first_write_is_revision_one_and_each_write_adds_one() -> None:
    first = write_todos_plan(None, [PENDING], InteractionMode.CHAT, updated_at=NOW)
    assert (first.revision, first.status, first.todos, first.updated_at) == (
        1,
        PlanStatus.ACTIVE,
        (PENDING,),
        NOW,
    )
    second = write_todos_plan(first, [DONE], InteractionMode.EXECUTING)
    assert second.revision == 2
    cleared = write_todos_plan(second, [], InteractionMode.CHAT)
    assert (cleared.revision, cleared.status) == (3, PlanStatus.CLEARED)
    # A cleared plan still counts its revisions.
    assert write_todos_plan(cleared, [PENDING], InteractionMode.CHAT).revision == 4


@pytest.mark.parametrize(
    ("todos", "mode", "status"),
    [
        ([], InteractionMode.PLANNING, PlanStatus.CLEARED),
        ([], InteractionMode.CHAT, PlanStatus.CLEARED),
        ([PENDING], InteractionMode.PLANNING, PlanStatus.DRAFT),
        ([DONE], InteractionMode.PLANNING, PlanStatus.DRAFT),
        ([DONE, DONE], InteractionMode.CHAT, PlanStatus.COMPLETED),
        ([DONE], InteractionMode.EXECUTING, PlanStatus.COMPLETED),
        ([DONE, RUNNING], InteractionMode.EXECUTING, PlanStatus.ACTIVE),
        ([PENDING], InteractionMode.CHAT, PlanStatus.ACTIVE),
    ],
)
def test_plan_status_follows_the_first_rule_that_applies(
    todos: list[AgentTodo], mode: InteractionMode, status: PlanStatus
) -> None:
    assert write_todos_plan(None, todos, mode).status is status


def test_interaction_mode_may_be_given_as_text_and_is_checked() -> None:
    assert write_todos_plan(None, [PENDING], "planning").status is PlanStatus.DRAFT
    with pytest.raises(ConfigurationError):
        write_todos_plan(None, [PENDING], "brainstorming")


def test_write_todos_results_have_exact_texts() -> None:
    updated = AgentPlan(3, PlanStatus.ACTIVE, (PENDING, RUNNING))
    assert write_todos_result(updated) == '{"status":"updated","revision":3,"task_count":2}'
    draft = AgentPlan(1, PlanStatus.DRAFT, (PENDING,))
    assert write_todos_result(draft) == '{"status":"updated","revision":1,"task_count":1}'
    completed = AgentPlan(5, PlanStatus.COMPLETED, (DONE,))
    assert write_todos_result(completed) == '{"status":"updated","revision":5,"task_count":1}'
    assert write_todos_result(AgentPlan(4, PlanStatus.CLEARED)) == (
        '{"status":"cleared","revision":4}'
    )


def test_plan_updated_payload() -> None:
    payload = PlanUpdatedPayload.of(AgentPlan(2, PlanStatus.DRAFT, (PENDING, DONE)))
    assert encode_event_payload(event_payload_fields(payload)) == (
        '{"revision":2,"status":"draft","task_count":2}'
    )


# Planning turns


def test_a_planning_turn_runs_only_write_todos() -> None:
    assert planning_turn_allows_tool("write_todos")
    assert not planning_turn_allows_tool("ask_user")
    assert not planning_turn_allows_tool("search_tickets")
    assert PLANNING_TURN_TOOL_REJECTION == (
        "The tool call was not run: a planning turn can only call write_todos."
    )


@pytest.mark.parametrize(
    ("flags", "plan", "mode"),
    [
        ([False], None, InteractionMode.CHAT),
        ([True], None, InteractionMode.PLANNING),
        ([False, True], None, InteractionMode.PLANNING),
        ([False], AgentPlan(1, PlanStatus.DRAFT, (PENDING,)), InteractionMode.PLANNING),
        ([False], AgentPlan(1, PlanStatus.ACTIVE, (PENDING,)), InteractionMode.CHAT),
        ([False], AgentPlan(1, PlanStatus.COMPLETED, (DONE,)), InteractionMode.CHAT),
        ([False], AgentPlan(1, PlanStatus.CLEARED), InteractionMode.CHAT),
        ([True], AgentPlan(1, PlanStatus.ACTIVE, (PENDING,)), InteractionMode.PLANNING),
    ],
)
def test_turn_interaction_mode(
    flags: list[bool], plan: AgentPlan | None, mode: InteractionMode
) -> None:
    assert turn_interaction_mode(flags, plan) is mode


# Plan execution


def test_plan_execution_key_is_decimal() -> None:
    assert plan_execution_key(1) == "1"
    assert plan_execution_key(120) == "120"
    for bad_revision in (0, -1, True):
        with pytest.raises(ConfigurationError, match="plan revision must be an int from 1"):
            plan_execution_key(bad_revision)


def test_plan_execution_message_has_the_exact_text() -> None:
    assert plan_execution_message(7) == (
        "[Dex] The user approved plan revision 7. "
        "Execute it and keep the task statuses current with write_todos."
    )
    with pytest.raises(ConfigurationError):
        plan_execution_message(0)


def test_approval_marks_a_draft_active_with_the_same_revision_and_tasks() -> None:
    draft = AgentPlan(2, PlanStatus.DRAFT, (PENDING, DONE), updated_at=None)
    approved = approve_plan(draft, updated_at=NOW)
    assert approved == AgentPlan(2, PlanStatus.ACTIVE, (PENDING, DONE), updated_at=NOW)
    assert approve_plan(approved).status is PlanStatus.ACTIVE
    for status in (PlanStatus.COMPLETED, PlanStatus.CLEARED):
        with pytest.raises(ConfigurationError, match="only a draft or active plan can be approved"):
            approve_plan(replace(draft, status=status))


def test_only_an_approval_of_the_current_draft_or_active_revision_applies() -> None:
    draft = AgentPlan(3, PlanStatus.DRAFT, (PENDING,))
    assert is_current_plan_approval(PlanExecutionRequest(3), draft)
    assert is_current_plan_approval(
        PlanExecutionRequest(3), replace(draft, status=PlanStatus.ACTIVE)
    )
    assert not is_current_plan_approval(PlanExecutionRequest(2), draft)
    assert not is_current_plan_approval(PlanExecutionRequest(3), None)
    assert not is_current_plan_approval(
        PlanExecutionRequest(3), replace(draft, status=PlanStatus.COMPLETED)
    )


DRAFT_2 = AgentPlan(2, PlanStatus.DRAFT, (PENDING,))


def _idle(plan: AgentPlan | None = DRAFT_2) -> PlanExecutionState:
    return PlanExecutionState(AgentStatus.WAITING_FOR_USER_MESSAGE, None, plan)


def test_execute_plan_accepts_a_draft_or_active_revision_while_the_session_waits() -> None:
    assert plan_execution_refusal(ExecutePlanRequest(2), _idle()) is None
    assert accepts_plan_execution(ExecutePlanRequest(2), _idle())
    active = AgentPlan(2, PlanStatus.ACTIVE, (PENDING,))
    assert accepts_plan_execution(ExecutePlanRequest(2), _idle(active))


@pytest.mark.parametrize(
    ("state", "revision", "refusal"),
    [
        (
            replace(_idle(), status=AgentStatus.RUNNING_MODEL, active_turn_id="turn-4"),
            2,
            "the session is not waiting for a user message",
        ),
        (
            replace(_idle(), active_turn_id="turn-4"),
            2,
            "the session is not waiting for a user message",
        ),
        (_idle(None), 1, "the session has no plan"),
        (_idle(), 1, "the plan is at revision 2, not 1"),
        (_idle(), 3, "the plan is at revision 2, not 3"),
        (
            _idle(AgentPlan(2, PlanStatus.COMPLETED, (DONE,))),
            2,
            "plan revision 2 is completed, not draft or active",
        ),
        (
            _idle(AgentPlan(2, PlanStatus.CLEARED)),
            2,
            "plan revision 2 is cleared, not draft or active",
        ),
        (
            replace(_idle(), pending_plan_execution=PlanExecutionRequest(2)),
            2,
            "an execution of plan revision 2 is pending",
        ),
        (replace(_idle(), queued_message_count=1), 2, "a user message is queued"),
        (replace(_idle(), steered_message_count=1), 2, "a steered user message is pending"),
        (replace(_idle(), pending_interrupt_count=1), 2, "an interrupt is pending"),
    ],
)
def test_execute_plan_refusals(state: PlanExecutionState, revision: int, refusal: str) -> None:
    assert plan_execution_refusal(ExecutePlanRequest(revision), state) == refusal
    assert not accepts_plan_execution(ExecutePlanRequest(revision), state)


# Plan notes


def test_no_note_without_a_plan_outside_planning_turns() -> None:
    assert build_plan_note(None, InteractionMode.CHAT) is None
    assert build_plan_note(None, InteractionMode.EXECUTING) is None
    assert build_plan_note(AgentPlan(4, PlanStatus.CLEARED), InteractionMode.CHAT) is None


def test_active_plan_note_lists_tasks_and_asks_for_status_updates() -> None:
    plan = AgentPlan(3, PlanStatus.ACTIVE, (DONE, RUNNING, PENDING))
    assert build_plan_note(plan, InteractionMode.EXECUTING) == (
        "[Dex] The current plan, revision 3 (active):\n"
        "1. [completed] Announce the window\n"
        "2. [in_progress] Run the migration\n"
        "3. [pending] Back up the database\n"
        "Keep the task statuses current with write_todos: mark a task in_progress when you "
        "start it and completed when it is done, and send the whole list each time."
    )


def test_completed_and_draft_notes_say_what_to_do() -> None:
    completed = build_plan_note(AgentPlan(5, PlanStatus.COMPLETED, (DONE,)), "chat")
    assert completed is not None
    assert completed.startswith("[Dex] The current plan, revision 5 (completed):\n")
    assert completed.endswith(
        "Every task is completed. Write a new plan with write_todos only when new work needs one."
    )
    draft = build_plan_note(AgentPlan(1, PlanStatus.DRAFT, (PENDING,)), "chat")
    assert draft is not None
    assert draft.endswith("The user has not approved this plan yet, so do not carry it out.")


def test_planning_note_without_a_plan_tells_the_model_to_write_one() -> None:
    note = build_plan_note(None, InteractionMode.PLANNING)
    assert note is not None
    assert note.startswith("[Dex] Plan mode: ")
    assert "write_todos" in note
    assert "call no other tool" in note
    assert "current plan" not in note
    assert build_plan_note(AgentPlan(2, PlanStatus.CLEARED), "planning") == note


def test_planning_note_with_a_draft_shows_it_for_revision() -> None:
    plan = AgentPlan(2, PlanStatus.DRAFT, (PENDING, RUNNING))
    note = build_plan_note(plan, "planning")
    assert note is not None
    lines = note.split("\n")
    assert lines[0].startswith("[Dex] Plan mode: ")
    assert lines[1:] == [
        "The current plan, revision 2 (draft):",
        "1. [pending] Back up the database",
        "2. [in_progress] Run the migration",
        "Revise it to follow the user's latest message: call write_todos with the whole revised list.",
    ]


def test_multi_line_task_content_stays_inside_its_item() -> None:
    plan = AgentPlan(1, PlanStatus.ACTIVE, (AgentTodo("Check\n2. [completed] fake"),))
    note = build_plan_note(plan, "chat")
    assert note is not None
    assert "1. [pending] Check\n   2. [completed] fake" in note


def test_note_interaction_mode_is_checked() -> None:
    with pytest.raises(ConfigurationError):
        build_plan_note(None, "brainstorming")


def test_write_todos_results_are_json() -> None:
    plan = write_todos_plan(None, [PENDING, DONE], "chat")
    assert json.loads(write_todos_result(plan)) == {
        "status": "updated",
        "revision": 1,
        "task_count": 2,
    }
