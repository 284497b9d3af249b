"""Plan mode: a draft, feedback that revises it, execute_plan, and the executing turn."""

from __future__ import annotations

import pytest
from dex_agents import (
    AgentSessionClient,
    InteractionMode,
    PlanStatus,
)
from dex_agents.testing import assistant_texts, wait_for_turn_end
from dex_agents.testing.scenarios import PLAN_FLOW_TYPE, ScenarioCall, ScenarioCommand
from scenario_support.harness import Scenario
from scenario_support.runners import runner_supports


def _write_todos(*tasks: str) -> ScenarioCommand:
    todos = [{"content": task, "status": "pending"} for task in tasks]
    return ScenarioCommand(calls=(ScenarioCall("write_todos", arguments={"todos": todos}),))


def _plan_sessions(scenario: Scenario) -> AgentSessionClient:
    if not runner_supports(scenario.runner, "plan_mode"):
        pytest.skip(f"runner {scenario.runner} is not a PlanModeRunner (no plan_mode feature)")
    return scenario.sessions_of(PLAN_FLOW_TYPE)


async def test_plan_mode_draft_feedback_execute(scenario: Scenario) -> None:
    sessions = _plan_sessions(scenario)
    await sessions.start_session("plan")
    assert await sessions.send_user_message(
        "plan", _write_todos("Back up").to_message(), plan_mode=True
    )
    await wait_for_turn_end(sessions, "plan", 1)
    snapshot = await sessions.get_agent_snapshot("plan")
    assert snapshot.plan is not None
    assert (snapshot.plan.revision, snapshot.plan.status) == (1, PlanStatus.DRAFT)
    assert snapshot.state is not None
    assert snapshot.state.interaction_mode is InteractionMode.PLANNING

    # Feedback on a draft is an ordinary message that revises it in another planning turn.
    assert await sessions.send_user_message("plan", _write_todos("Back up", "Migrate").to_message())
    await wait_for_turn_end(sessions, "plan", 2)
    snapshot = await sessions.get_agent_snapshot("plan")
    assert snapshot.plan is not None
    assert (snapshot.plan.revision, snapshot.plan.status) == (2, PlanStatus.DRAFT)
    assert [todo.content for todo in snapshot.plan.todos] == ["Back up", "Migrate"]

    assert not await sessions.execute_plan("plan", 1)  # replaced by revision 2
    assert await sessions.execute_plan("plan", 2)
    await wait_for_turn_end(sessions, "plan", 3)
    snapshot = await sessions.get_agent_snapshot("plan")
    assert snapshot.state is not None
    assert snapshot.state.interaction_mode is InteractionMode.EXECUTING
    assert snapshot.plan is not None
    assert (snapshot.plan.revision, snapshot.plan.status) == (2, PlanStatus.ACTIVE)
    assert assistant_texts(snapshot)[-1] == (
        "Echo: [Dex] The user approved plan revision 2. Execute it and keep the task statuses "
        "current with write_todos."
    )
    # An active plan of that revision may be executed again, as the seed's rule says.
    assert await sessions.execute_plan("plan", 2)
    await wait_for_turn_end(sessions, "plan", 4)
    assert not await sessions.execute_plan("plan", 3)  # no such revision


async def test_a_plan_mode_message_is_refused_when_plan_mode_is_off(scenario: Scenario) -> None:
    await scenario.sessions.start_session("chat")
    assert not await scenario.sessions.send_user_message("chat", "Plan it", plan_mode=True)
    assert not await scenario.sessions.execute_plan("chat", 1)
