"""The turn Steps of the agent session: start, user messages, resuming, and failure.

``StartAgentSession -> AwaitUserMessage -> RunModel``; ``RunModel`` either completes the turn
(back to ``AwaitUserMessage``) or moves to one Step per tool call plus ``ResumeTurn``, which waits
for every call's ``ToolCallResults`` message and runs the next model call. ``RecordTurnFailure``
is ``RunModel``'s failure route.
"""

from __future__ import annotations

from dataclasses import replace
from enum import Enum

from dex import AsyncContext, StepDecision, StepOptions, Wait, force_fail, go_to_many

from dex_agents._plans import turn_interaction_mode
from dex_agents._session.control import turn_control_reason_now, wake_waits_for_steer
from dex_agents._session.persistence import (
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_USAGE,
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    SESSION_SETTINGS,
    TOOL_CALL_RESULTS,
    TURN_CONTROL_REQUESTS,
)
from dex_agents._session.plans import (
    plan_approval_condition,
    start_executing_turn,
    take_plan_approval,
)
from dex_agents._session.records import load_all_tool_calls
from dex_agents._session.settings import (
    SESSION_SETTINGS_SIZE_TOLERANCE_BYTES,
    encode_session_settings,
    invalid_start_session_settings_reason,
    session_settings_problem,
)
from dex_agents._session.size_budgets import user_text_problem
from dex_agents._session.step_base import SessionStep
from dex_agents._session.step_options import (
    await_user_message_step_options,
    message_storing_step_options,
    resume_turn_step_options,
    turn_failure_step_options,
)
from dex_agents._session.transitions import recovery_error_text, unfinished_tool_calls
from dex_agents._session.turns import begin_turn, fail_active_turn
from dex_agents._text_validity import is_blank_text
from dex_agents._values import (
    AgentSessionStartInput,
    AgentState,
    AgentStatus,
    empty_agent_usage,
)

__all__ = [
    "AwaitUserMessage",
    "FailedStepInput",
    "RecordTurnFailure",
    "ResumeTurn",
    "StartAgentSession",
]


class StartAgentSession(SessionStep[AgentSessionStartInput]):
    """Start Step: initializes state, usage, interrupts, and settings; starts the first turn when
    the initial message is not blank."""

    def get_step_options(self) -> StepOptions | None:
        return message_storing_step_options()

    async def execute(self, context: AsyncContext, input: AgentSessionStartInput) -> StepDecision:  # type: ignore[override]
        problem = session_settings_problem(
            input.session_settings, tolerance_bytes=SESSION_SETTINGS_SIZE_TOLERANCE_BYTES
        )
        if problem is not None:
            # Retrying cannot make the settings valid, so the session fails at once.
            return force_fail(invalid_start_session_settings_reason(problem))
        AGENT_USAGE.set(context, empty_agent_usage())
        PENDING_INTERRUPTS.set(context, [])
        SESSION_SETTINGS.set(context, encode_session_settings(input.session_settings))
        state = AgentState()
        if is_blank_text(input.initial_message):
            AGENT_STATE.set(context, state)
            return go_to_many(self._runtime.movements.await_user_message())
        problem = user_text_problem(self._runtime.runner.build_user_message, input.initial_message)
        if problem is not None:
            # Past the client's check: the session starts without the turn, and says why.
            AGENT_STATE.set(context, replace(state, last_turn_error=f"initial {problem}"))
            return go_to_many(self._runtime.movements.await_user_message())
        mode = turn_interaction_mode(
            [input.plan_mode and self._runtime.options.plan_mode_enabled], None
        )
        return begin_turn(
            context,
            self._runtime,
            state,
            input.initial_message,
            step_type=type(self).__name__,
            interaction_mode=mode,
        )


class AwaitUserMessage(SessionStep[None]):
    """Waits for a steer or the next queued user message and starts a turn with it.

    Locks ``TurnCancellationRequest`` in execute, so no turn starts while ``cancel_turn`` decides.
    """

    def get_step_options(self) -> StepOptions | None:
        return await_user_message_step_options()

    async def wait_for(self, context: AsyncContext, input: None) -> Wait:  # type: ignore[override]
        # In this order: a steer that arrived as the turn ended comes before a queued message,
        # and a queued message before an approval of the current plan revision.
        conditions = [TURN_CONTROL_REQUESTS.for_one(), QUEUED_USER_MESSAGES.for_one()]
        approval = plan_approval_condition(context)
        return Wait.any_of(*conditions, *([approval] if approval is not None else []))

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # type: ignore[override]
        movements = self._runtime.movements
        if TURN_CONTROL_REQUESTS.results(context):
            return go_to_many(movements.apply_turn_control())
        state = AGENT_STATE.get(context) or AgentState()
        messages = [m for m in QUEUED_USER_MESSAGES.results(context) if not is_blank_text(m.text)]
        # A message that came with an approval wins; the approval is then dropped.
        approval = take_plan_approval(context)
        if messages:
            mode = turn_interaction_mode(
                [messages[0].plan_mode and self._runtime.options.plan_mode_enabled],
                AGENT_PLAN.get(context),
            )
            return begin_turn(
                context,
                self._runtime,
                state,
                messages[0].text,
                step_type=type(self).__name__,
                interaction_mode=mode,
            )
        if approval is not None and approval.is_current:
            return start_executing_turn(
                context, self._runtime, state, approval, step_type=type(self).__name__
            )
        return go_to_many(movements.await_user_message())


class ResumeTurn(SessionStep[int]):
    """Waits for ``ToolCallResults.for_n(expected_result_count)``, then runs the next model call.

    Goes back to waiting when a consumed result left a record of the turn unfinished. A steer wake
    cancels the turn's waits for a person or a Timer, then waits again.
    """

    def get_step_options(self) -> StepOptions | None:
        return resume_turn_step_options()

    async def wait_for(self, context: AsyncContext, input: int) -> Wait:  # type: ignore[override]
        if input <= 0:
            return Wait.skip_immediately()
        return Wait.any_of(TOOL_CALL_RESULTS.for_n(input), TURN_CONTROL_REQUESTS.for_one())

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        movements = self._runtime.movements
        state = AGENT_STATE.get(context)
        if state is None or state.active_turn_id is None:
            return go_to_many(movements.await_user_message())
        if TURN_CONTROL_REQUESTS.results(context):
            # A steer wake: cancel the turn's waits for a person or a Timer, then wait again.
            wake_waits_for_steer(context, state)
            return go_to_many(movements.resume_turn(input))
        unfinished = unfinished_tool_calls(load_all_tool_calls(context), state.active_turn_id)
        if unfinished:
            return go_to_many(movements.resume_turn(len(unfinished)))
        if turn_control_reason_now(context, state) is not None:
            return go_to_many(movements.apply_turn_control())
        AGENT_STATE.set(context, replace(state, status=AgentStatus.RUNNING_MODEL))
        return go_to_many(movements.run_model(context))


class FailedStepInput(Enum):
    """``RecordTurnFailure``'s input: the failing Step's input, which it ignores.

    Dex hands a failure route the failing Step's input: ``None`` from ``RunModel``, a
    ``CompactContextInput`` object from ``CompactContext``. The SDK decodes an Enum input by calling
    the Enum, so :meth:`_missing_` reads any other JSON value as :attr:`IGNORED` too.
    """

    IGNORED = None

    @classmethod
    def _missing_(cls, value: object) -> FailedStepInput:
        return cls.IGNORED


class RecordTurnFailure(SessionStep[FailedStepInput]):
    """``RunModel``'s failure route: records ``last_turn_error``, stores the runner's
    unfinished-turn messages and a turn-failure note when tools ran, and clears the turn."""

    def get_step_options(self) -> StepOptions | None:
        return turn_failure_step_options()

    async def execute(self, context: AsyncContext, input: FailedStepInput) -> StepDecision:  # type: ignore[override]
        state = AGENT_STATE.get(context)
        if state is None or state.active_turn_id is None:
            return go_to_many(self._runtime.movements.await_user_message())
        error = recovery_error_text(context.recovery_error) or "the turn failed"
        events = self._runtime.event_writer(context, state.active_turn_id)
        return fail_active_turn(context, self._runtime, state, error, events)
