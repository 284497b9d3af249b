"""Plans and plan mode: the pure rules behind ``write_todos``, plan notes and ``execute_plan``.

The ``write_todos`` built-in replaces the session's plan, the ``AgentPlan`` Attribute, as a whole:
each call that succeeds writes the next revision (:func:`write_todos_plan`) and the model sees
:func:`write_todos_result`. In plan mode a planning turn writes a ``draft``, the user approves a
revision with ``execute_plan`` (:func:`plan_execution_refusal` decides), and the session starts an
executing turn whose user message is :func:`plan_execution_message`. :func:`build_plan_note`
renders the note that shows the model the plan in every model call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

from dex_agents._built_in_tools import BuiltInTool
from dex_agents._enum_values import enum_member
from dex_agents._json_values import JsonObject
from dex_agents._values import (
    AgentPlan,
    AgentStatus,
    AgentTodo,
    ExecutePlanRequest,
    InteractionMode,
    PlanExecutionRequest,
    PlanStatus,
    TodoStatus,
)
from dex_agents.exceptions import ConfigurationError

__all__ = [
    "PLANNING_TURN_TOOL_REJECTION",
    "PLAN_NOTE_PREFIX",
    "PlanExecutionState",
    "accepts_plan_execution",
    "approve_plan",
    "build_plan_note",
    "is_current_plan_approval",
    "plan_execution_key",
    "plan_execution_message",
    "plan_execution_refusal",
    "planning_turn_allows_tool",
    "turn_interaction_mode",
    "write_todos_plan",
    "write_todos_result",
]

PLANNING_TURN_TOOL_REJECTION: Final = (
    "The tool call was not run: a planning turn can only call write_todos."
)
"""Model-visible result of any call but ``write_todos`` in a planning turn; recorded in RunModel."""
PLAN_NOTE_PREFIX: Final = "[Dex] "
"""Start of every :func:`build_plan_note` text, like the session's other notes."""

_EXECUTABLE_PLAN_STATUSES: Final = frozenset({PlanStatus.DRAFT, PlanStatus.ACTIVE})

_PLANNING_INSTRUCTIONS: Final = (
    "Plan mode: this turn writes a plan; it does not carry it out. Call write_todos with every "
    "task of the plan, in order, each with status pending, and call no other tool: the user "
    "reviews the plan and approves it before any task runs. If you need more information to "
    "plan well, ask the user in text instead."
)
_PLANNING_REVISION_LINE: Final = (
    "Revise it to follow the user's latest message: call write_todos with the whole revised list."
)
_CLOSING_LINES: Final = {
    PlanStatus.DRAFT: "The user has not approved this plan yet, so do not carry it out.",
    PlanStatus.ACTIVE: (
        "Keep the task statuses current with write_todos: mark a task in_progress when you start "
        "it and completed when it is done, and send the whole list each time."
    ),
    PlanStatus.COMPLETED: (
        "Every task is completed. Write a new plan with write_todos only when new work needs one."
    ),
}


def plan_execution_key(revision: int) -> str:
    """Return the ``PlanExecutions`` ChannelMap key of a plan revision: its decimal digits.

    Raises:
        ConfigurationError: When ``revision`` is not an int from 1.

    Example:
        >>> plan_execution_key(12)
        '12'
    """
    _require_revision(revision)
    return str(revision)


def plan_execution_message(revision: int) -> str:
    """Return the user message of the executing turn that an approval of ``revision`` starts.

    Raises:
        ConfigurationError: When ``revision`` is not an int from 1.

    Example:
        >>> plan_execution_message(2)
        '[Dex] The user approved plan revision 2. Execute it and keep the task statuses current with write_todos.'
    """
    _require_revision(revision)
    return (
        f"[Dex] The user approved plan revision {revision}. "
        "Execute it and keep the task statuses current with write_todos."
    )


def planning_turn_allows_tool(tool_name: str) -> bool:
    """Return whether a planning turn runs a call of ``tool_name``: only ``write_todos`` runs.

    Every other call of a planning turn records :data:`PLANNING_TURN_TOOL_REJECTION`.

    Example:
        >>> planning_turn_allows_tool("write_todos"), planning_turn_allows_tool("search")
        (True, False)
    """
    return tool_name == BuiltInTool.WRITE_TODOS.value


def turn_interaction_mode(
    plan_mode_requests: Iterable[bool], plan: AgentPlan | None
) -> InteractionMode:
    """Return the mode of a turn that starts with messages whose ``plan_mode`` flags are given.

    A turn plans when any of its messages has ``plan_mode`` or a ``draft`` plan exists; an
    executing turn starts only from an approval, never from messages.

    Example:
        >>> turn_interaction_mode([False], None)
        <InteractionMode.CHAT: 'chat'>
        >>> turn_interaction_mode([False], AgentPlan(1, PlanStatus.DRAFT))
        <InteractionMode.PLANNING: 'planning'>
    """
    requested = any(plan_mode_requests)
    if requested or (plan is not None and plan.status is PlanStatus.DRAFT):
        return InteractionMode.PLANNING
    return InteractionMode.CHAT


def write_todos_plan(
    current: AgentPlan | None,
    todos: Sequence[AgentTodo],
    interaction_mode: InteractionMode | str,
    *,
    updated_at: datetime | None = None,
) -> AgentPlan:
    """Return the plan a successful ``write_todos`` call writes over ``current``.

    The revision is ``current.revision + 1`` (1 for the first plan). The status, first rule that
    applies: no tasks is ``cleared``, a planning turn writes a ``draft``, every task completed is
    ``completed``, anything else is ``active``.

    Raises:
        ConfigurationError: When ``interaction_mode`` is not an interaction mode.

    Example:
        >>> plan = write_todos_plan(None, [AgentTodo("Back up", TodoStatus.COMPLETED)], "chat")
        >>> plan.revision, plan.status
        (1, <PlanStatus.COMPLETED: 'completed'>)
    """
    mode = enum_member(InteractionMode, interaction_mode, "interaction_mode")
    revision = 1 if current is None else current.revision + 1
    todos = tuple(todos)
    if not todos:
        status = PlanStatus.CLEARED
    elif mode is InteractionMode.PLANNING:
        status = PlanStatus.DRAFT
    elif all(todo.status is TodoStatus.COMPLETED for todo in todos):
        status = PlanStatus.COMPLETED
    else:
        status = PlanStatus.ACTIVE
    return AgentPlan(revision=revision, status=status, todos=todos, updated_at=updated_at)


def write_todos_result(plan: AgentPlan) -> str:
    """Return the model-visible result of the ``write_todos`` call that wrote ``plan``.

    Example:
        >>> write_todos_result(AgentPlan(3, PlanStatus.ACTIVE, (AgentTodo("Back up"),)))
        '{"status":"updated","revision":3,"task_count":1}'
        >>> write_todos_result(AgentPlan(4, PlanStatus.CLEARED))
        '{"status":"cleared","revision":4}'
    """
    if plan.status is PlanStatus.CLEARED:
        result: JsonObject = {"status": "cleared", "revision": plan.revision}
    else:
        result = {"status": "updated", "revision": plan.revision, "task_count": len(plan.todos)}
    # The documented key order is part of the text the model sees, so keys are not sorted.
    return json.dumps(result, separators=(",", ":"))


def approve_plan(plan: AgentPlan, *, updated_at: datetime | None = None) -> AgentPlan:
    """Return ``plan`` as an approval leaves it: ``active``, with the same revision and tasks.

    Raises:
        ConfigurationError: When ``plan`` is neither ``draft`` nor ``active``.

    Example:
        >>> approve_plan(AgentPlan(2, PlanStatus.DRAFT, (AgentTodo("Back up"),))).status
        <PlanStatus.ACTIVE: 'active'>
    """
    if plan.status not in _EXECUTABLE_PLAN_STATUSES:
        raise ConfigurationError(
            f"plan revision {plan.revision} is {plan.status.value}; "
            "only a draft or active plan can be approved"
        )
    return replace(plan, status=PlanStatus.ACTIVE, updated_at=updated_at or plan.updated_at)


def is_current_plan_approval(request: PlanExecutionRequest, plan: AgentPlan | None) -> bool:
    """Return whether an approval still applies: it names the plan's revision, draft or active.

    ``AwaitUserMessage`` drops an approval that a later revision replaced, so it never runs.

    Example:
        >>> plan = AgentPlan(3, PlanStatus.DRAFT)
        >>> is_current_plan_approval(PlanExecutionRequest(3), plan)
        True
        >>> is_current_plan_approval(PlanExecutionRequest(2), plan)
        False
    """
    return (
        plan is not None
        and plan.revision == request.revision
        and plan.status in _EXECUTABLE_PLAN_STATUSES
    )


@dataclass(frozen=True)
class PlanExecutionState:
    """What ``execute_plan`` reads to decide, as committed when the RPC runs.

    Attributes:
        status: ``AgentState.status``.
        active_turn_id: ``AgentState.active_turn_id``; ``None`` while no turn runs.
        plan: The ``AgentPlan`` Attribute, or ``None`` before ``write_todos`` first succeeded.
        pending_plan_execution: The ``PendingPlanExecution`` Attribute, or ``None``.
        queued_message_count: Messages in ``QueuedUserMessages``.
        steered_message_count: Messages in ``SteeredUserMessages``.
        pending_interrupt_count: Items of ``PendingInterrupts``.
    """

    status: AgentStatus
    active_turn_id: str | None
    plan: AgentPlan | None
    pending_plan_execution: PlanExecutionRequest | None = None
    queued_message_count: int = 0
    steered_message_count: int = 0
    pending_interrupt_count: int = 0


def plan_execution_refusal(request: ExecutePlanRequest, state: PlanExecutionState) -> str | None:
    """Return why ``execute_plan`` refuses ``request`` in ``state``, or ``None`` to accept it.

    It accepts only while the session waits for a user message, the plan has the requested
    revision and is ``draft`` or ``active``, no execution is pending, and nothing is queued,
    steered, or pending. The reason is for logs; the RPC returns ``False``.

    Example:
        >>> state = PlanExecutionState(AgentStatus.WAITING_FOR_USER_MESSAGE, None,
        ...     AgentPlan(2, PlanStatus.DRAFT, (AgentTodo("Back up"),)))
        >>> plan_execution_refusal(ExecutePlanRequest(2), state) is None
        True
        >>> plan_execution_refusal(ExecutePlanRequest(1), state)
        'the plan is at revision 2, not 1'
    """
    plan = state.plan
    if state.status is not AgentStatus.WAITING_FOR_USER_MESSAGE or state.active_turn_id:
        return "the session is not waiting for a user message"
    if plan is None:
        return "the session has no plan"
    if plan.revision != request.revision:
        return f"the plan is at revision {plan.revision}, not {request.revision}"
    if plan.status not in _EXECUTABLE_PLAN_STATUSES:
        return f"plan revision {plan.revision} is {plan.status.value}, not draft or active"
    if state.pending_plan_execution is not None:
        return f"an execution of plan revision {state.pending_plan_execution.revision} is pending"
    if state.queued_message_count > 0:
        return "a user message is queued"
    if state.steered_message_count > 0:
        return "a steered user message is pending"
    if state.pending_interrupt_count > 0:
        return "an interrupt is pending"
    return None


def accepts_plan_execution(request: ExecutePlanRequest, state: PlanExecutionState) -> bool:
    """Return whether ``execute_plan`` accepts ``request``; see :func:`plan_execution_refusal`.

    Example:
        >>> state = PlanExecutionState(AgentStatus.RUNNING_MODEL, "turn-2",
        ...     AgentPlan(2, PlanStatus.DRAFT, (AgentTodo("Back up"),)))
        >>> accepts_plan_execution(ExecutePlanRequest(2), state)
        False
    """
    return plan_execution_refusal(request, state) is None


def build_plan_note(plan: AgentPlan | None, interaction_mode: InteractionMode | str) -> str | None:
    """Return the note that shows the model the plan, or ``None`` when there is nothing to show.

    A runner adds it as user text before the turn's items in every model call. A planning turn
    always gets a note, which tells the model to write the plan with ``write_todos`` and lists the
    current plan to revise, if any. Other turns get one while the plan has tasks: the tasks with
    their statuses and what to do with them.

    Raises:
        ConfigurationError: When ``interaction_mode`` is not an interaction mode.

    Example:
        >>> plan = AgentPlan(3, PlanStatus.ACTIVE,
        ...     (AgentTodo("Back up", TodoStatus.COMPLETED), AgentTodo("Migrate", TodoStatus.IN_PROGRESS)))
        >>> print(build_plan_note(plan, "executing"))
        [Dex] The current plan, revision 3 (active):
        1. [completed] Back up
        2. [in_progress] Migrate
        Keep the task statuses current with write_todos: mark a task in_progress when you start it and completed when it is done, and send the whole list each time.
        >>> build_plan_note(None, "chat") is None
        True
    """
    mode = enum_member(InteractionMode, interaction_mode, "interaction_mode")
    shown = plan if plan is not None and plan.status is not PlanStatus.CLEARED else None
    if mode is InteractionMode.PLANNING:
        lines = [PLAN_NOTE_PREFIX + _PLANNING_INSTRUCTIONS]
        if shown is not None:
            lines.extend(_plan_lines(shown))
            lines.append(_PLANNING_REVISION_LINE)
        return "\n".join(lines)
    if shown is None:
        return None
    lines = _plan_lines(shown)
    lines[0] = PLAN_NOTE_PREFIX + lines[0]
    lines.append(_CLOSING_LINES[shown.status])
    return "\n".join(lines)


def _plan_lines(plan: AgentPlan) -> list[str]:
    lines = [f"The current plan, revision {plan.revision} ({plan.status.value}):"]
    for number, todo in enumerate(plan.todos, start=1):
        # Indent continuation lines, so a multi-line task cannot read as the next task.
        content = todo.content.replace("\n", "\n   ")
        lines.append(f"{number}. [{todo.status.value}] {content}")
    return lines


def _require_revision(revision: int) -> None:
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
        raise ConfigurationError(f"plan revision must be an int from 1, got {revision!r}")
