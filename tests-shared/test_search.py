"""Finding sessions that need a person: search by the Step a session waits in, across agents."""

from __future__ import annotations

from dex_agents.testing import wait_until
from scenario_support.harness import Scenario
from test_approvals import REFUND
from test_questions_and_tasks import ASK


async def _waiting_in(scenario: Scenario, step_type: str) -> set[str]:
    # The engine is shared: other tests' sessions may wait in the same Step, so the query is
    # narrowed to this test's session prefix (it still spans both agents' Flow types).
    query = f"ActiveStepTypes = \"{step_type}\" AND FlowId STARTS_WITH '{scenario.prefix}'"
    page = await scenario.stack.client.search_flows(query, 50)
    return {entry.flow_id.removeprefix(scenario.prefix) for entry in page.flows}


async def test_search_finds_exactly_the_sessions_waiting_for_a_person(scenario: Scenario) -> None:
    await scenario.start("needs-approval", REFUND)
    await scenario.start("needs-answer", ASK)
    await scenario.start("just-chat", "hello")
    approval = await scenario.wait_for_pending_interrupt("needs-approval")
    question = await scenario.wait_for_pending_interrupt("needs-answer")
    await scenario.wait_for_turn_end("just-chat")
    # The other agent's approval expires after APPROVAL_DEADLINE (2 s), so it starts once the
    # others wait, however long a runner's model step takes to raise theirs, and the search is
    # polled itself: a snapshot first could see the approval pending too late on a loaded machine.
    await scenario.start("other-agent-approval", REFUND, deadline_agent=True)
    both = {"needs-approval", "other-agent-approval"}

    async def both_agents_waiting() -> bool | None:
        # One query finds the waiting sessions of both agents (Flow types), and nothing else.
        found = await _waiting_in(scenario, "AwaitToolApproval")
        assert found <= both, found
        return True if found == both else None

    await wait_until("both agents' sessions to wait for an approval", both_agents_waiting)
    assert await _waiting_in(scenario, "AwaitQuestionAnswer") == {"needs-answer"}

    # A session leaves the search once it moves on.
    assert await scenario.sessions.resolve_interrupt(
        "needs-approval", approval.interrupt_id, approved=True
    )
    assert await scenario.sessions.answer_question("needs-answer", question.interrupt_id, "eu")
    await scenario.wait_for_turn_end("needs-approval")
    await scenario.wait_for_turn_end("needs-answer")

    async def moved_on() -> bool | None:
        # The other agent's approval may have expired meanwhile (its deadline is 2 s).
        left = "needs-approval" not in await _waiting_in(scenario, "AwaitToolApproval")
        return True if left and not await _waiting_in(scenario, "AwaitQuestionAnswer") else None

    await wait_until("the answered sessions to leave the search", moved_on)
