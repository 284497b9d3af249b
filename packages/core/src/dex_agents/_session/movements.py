"""Every movement from one session Step to another, built in one place.

A Dex movement names its destination by the Step class, so a Step module that moved to another
Step would import that Step's module, and the Step modules would import each other. Instead the
Flow hands :class:`SessionMovements` the table of its Step classes (:class:`SessionStepClasses`)
once, and every Step asks its runtime's movements where to go next. A movement to a Step that
owns one tool call record carries the options of that record (its loads, its retries by effect,
its failure route), so parallel tool calls never share state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from dex import Context, Step, StepMovement, StepOptions

from dex_agents._session.built_in_transitions import next_question_interrupt_id
from dex_agents._session.compaction import CompactContextInput, summary_of_session
from dex_agents._session.message_store import message_chunk_loads
from dex_agents._session.options import AgentSessionOptions
from dex_agents._session.persistence import AGENT_TOOL_CALLS, CONTEXT_SUMMARY
from dex_agents._session.step_options import (
    POLL_TOOL_TASK_ATTEMPTS,
    cancel_tool_task_step_options,
    finish_turn_cancellation_step_options,
    resume_turn_step_options,
    run_model_step_options,
    tool_call_record_step_options,
    tool_call_step_options,
    with_selected_message_chunks,
)
from dex_agents._tool_policy import ToolEffect, ToolStepType, tool_effect_rules
from dex_agents._values import AgentToolCall, AgentToolCallStatus
from dex_agents.exceptions import ConfigurationError

__all__ = ["SessionMovements", "SessionStepClasses"]


@dataclass(frozen=True)
class SessionStepClasses:
    """The Step classes of the session Flow, which the Flow module hands to the movements.

    Attributes:
        start_agent_session: The start Step.
        others: Every other Step, in registration order, each also named below.
    """

    start_agent_session: type[Step[Any]]
    await_user_message: type[Step[None]]
    run_model: type[Step[None]]
    compact_context: type[Step[CompactContextInput]]
    resume_turn: type[Step[int]]
    record_turn_failure: type[Step[Any]]
    await_tool_approval: type[Step[str]]
    await_question_answer: type[Step[str]]
    await_timer: type[Step[str]]
    call_tool: type[Step[str]]
    call_single_attempt_tool: type[Step[str]]
    record_tool_failure: type[Step[str]]
    record_tool_outcome_unknown: type[Step[str]]
    poll_tool_task: type[Step[str]]
    cancel_tool_task: type[Step[str]]
    apply_turn_control: type[Step[None]]
    finish_turn_cancellation: type[Step[str]]
    check_tool_outcome: type[Step[str]]

    @property
    def others(self) -> tuple[type[Step[Any]], ...]:
        """Every Step but the start Step, in registration order."""
        return (
            self.await_user_message,
            self.run_model,
            self.await_tool_approval,
            self.call_tool,
            self.call_single_attempt_tool,
            self.record_tool_failure,
            self.record_tool_outcome_unknown,
            self.resume_turn,
            self.record_turn_failure,
            self.compact_context,
            self.await_question_answer,
            self.await_timer,
            self.poll_tool_task,
            self.cancel_tool_task,
            self.apply_turn_control,
            self.finish_turn_cancellation,
            self.check_tool_outcome,
        )


class SessionMovements:
    """Builds the movement to each session Step, and the options that name other Steps.

    Args:
        steps: The Flow's Step classes.
        options: The Flow type's session options (the model call and tool call limits).
    """

    def __init__(self, steps: SessionStepClasses, options: AgentSessionOptions) -> None:
        self._steps = steps
        self._options = options

    # --- The turn -------------------------------------------------------------------------------

    def await_user_message(self) -> StepMovement[None]:
        """To ``AwaitUserMessage``: the session waits for the next message."""
        return StepMovement.of(self._steps.await_user_message, None)

    def apply_turn_control(self) -> StepMovement[None]:
        """To ``ApplyTurnControl``: a steer or cancellation ends the turn."""
        return StepMovement.of(self._steps.apply_turn_control, None)

    def run_model(self, context: Context) -> StepMovement[None]:
        """To ``RunModel``; with a summary, it loads only the message chunks after it."""
        summary = summary_of_session(context, self._options)
        if summary is None:
            # Without compaction the model input is every message: the Step's own options load all.
            return StepMovement.of(self._steps.run_model, None)
        options = with_selected_message_chunks(
            self.run_model_options(),
            message_chunk_loads(context, after_sequence=summary.last_sequence),
        )
        return StepMovement.of(self._steps.run_model, None, options=options)

    def compact_context(
        self, context: Context, through_sequence: int
    ) -> StepMovement[CompactContextInput]:
        """To ``CompactContext``, loading only the message chunks after the current summary."""
        summary = CONTEXT_SUMMARY.get(context)
        options = with_selected_message_chunks(
            self.compact_context_options(),
            message_chunk_loads(
                context, after_sequence=summary.last_sequence if summary is not None else None
            ),
        )
        return StepMovement.of(
            self._steps.compact_context, CompactContextInput(through_sequence), options=options
        )

    def resume_turn(self, expected_result_count: int) -> StepMovement[int]:
        """To ``ResumeTurn``, which waits for that many ``ToolCallResults`` messages."""
        return StepMovement.of(
            self._steps.resume_turn, expected_result_count, options=resume_turn_step_options()
        )

    def finish_turn_cancellation(self, turn_id: str) -> StepMovement[str]:
        """To ``FinishTurnCancellation`` of ``turn_id``, as ``cancel_turn`` starts it."""
        return StepMovement.of(
            self._steps.finish_turn_cancellation,
            turn_id,
            options=finish_turn_cancellation_step_options(),
        )

    def run_model_options(self) -> StepOptions:
        """``RunModel``'s options: the model call limit, failure route ``RecordTurnFailure``."""
        return run_model_step_options(
            self._options.run_model_limit, self._steps.record_turn_failure
        )

    def compact_context_options(self) -> StepOptions:
        """``CompactContext``'s options: ``RunModel``'s timeouts, retries, loads, failure route."""
        return self.run_model_options()

    def steps_cancel_turn_cancels(self) -> tuple[type[Step[Any]], ...]:
        """The Steps whose running executions ``cancel_turn`` cancels: the model call, the
        compaction, the failure route, and every wait for a person, a Timer, or a task poll."""
        steps = self._steps
        return (
            steps.run_model,
            steps.compact_context,
            steps.record_turn_failure,
            steps.await_tool_approval,
            steps.await_question_answer,
            steps.await_timer,
            steps.poll_tool_task,
        )

    # --- One tool call ----------------------------------------------------------------------------

    def for_record(self, record: AgentToolCall) -> StepMovement[str]:
        """To the Step that owns a record that is not final, by its status.

        ``approved`` goes to the tool Step its effect selects, ``awaiting_approval`` to
        ``AwaitToolApproval``, ``awaiting_answer`` to ``AwaitQuestionAnswer``,
        ``waiting_for_timer`` to ``AwaitTimer``, and ``waiting_for_task`` to ``PollToolTask``.

        Raises:
            ConfigurationError: When the record is final: no Step owns it any more.
        """
        status = record.status
        if status is AgentToolCallStatus.APPROVED:
            return self._tool_step(record)
        if status is AgentToolCallStatus.AWAITING_APPROVAL:
            return self._record_step(self._steps.await_tool_approval, record, locks_interrupts=True)
        if status is AgentToolCallStatus.AWAITING_ANSWER:
            return self._question(record)
        if status is AgentToolCallStatus.WAITING_FOR_TIMER:
            return self._record_step(self._steps.await_timer, record)
        if status is AgentToolCallStatus.WAITING_FOR_TASK:
            return self._poll(record)
        raise ConfigurationError(f"tool call {record.tool_call_id!r} is final ({status.value})")

    def cancel_tool_task(self, tool_call_id: str) -> StepMovement[str]:
        """To ``CancelToolTask`` of a task ``cancel_turn`` abandoned; it records the call
        ``outcome_unknown`` even when the cancellation keeps failing."""
        return StepMovement.of(
            self._steps.cancel_tool_task,
            tool_call_id,
            options=cancel_tool_task_step_options(
                tool_call_id, failure_route=self._steps.record_tool_outcome_unknown
            ),
        )

    def check_tool_outcome(self, record: AgentToolCall) -> StepMovement[str]:
        """To ``CheckToolOutcome`` of a lost single-attempt call: retried like a ``read`` call
        (3 attempts, the tool call limit), failure route ``RecordToolOutcomeUnknown``."""
        return StepMovement.of(
            self._steps.check_tool_outcome,
            record.tool_call_id,
            options=tool_call_step_options(
                record.tool_call_id,
                limit=self._options.tool_call_limit,
                maximum_attempts=tool_effect_rules(ToolEffect.READ).max_attempts,
                failure_route=self._steps.record_tool_outcome_unknown,
            ),
        )

    def _record_step(
        self, step: type[Step[str]], record: AgentToolCall, *, locks_interrupts: bool = False
    ) -> StepMovement[str]:
        return StepMovement.of(
            step,
            record.tool_call_id,
            options=tool_call_record_step_options(
                record.tool_call_id, locks_interrupts=locks_interrupts
            ),
        )

    def _question(self, record: AgentToolCall) -> StepMovement[str]:
        # It also loads the record named like the next tool question's interrupt ID, so raising
        # the question can refuse an ID another call of the turn uses.
        options = tool_call_record_step_options(record.tool_call_id, locks_interrupts=True)
        candidate = next_question_interrupt_id(record)
        return StepMovement.of(
            self._steps.await_question_answer,
            record.tool_call_id,
            options=replace(
                options,
                execute_load_attribute_map_instances=(
                    *options.execute_load_attribute_map_instances,
                    AGENT_TOOL_CALLS.load(candidate),
                ),
            ),
        )

    def _tool_step(self, record: AgentToolCall) -> StepMovement[str]:
        rules = tool_effect_rules(record.effect)
        single = rules.step_type is ToolStepType.CALL_SINGLE_ATTEMPT_TOOL
        step = self._steps.call_single_attempt_tool if single else self._steps.call_tool
        return self._limited(step, record, rules.max_attempts)

    def _poll(self, record: AgentToolCall) -> StepMovement[str]:
        return self._limited(self._steps.poll_tool_task, record, POLL_TOOL_TASK_ATTEMPTS)

    def _limited(
        self, step: type[Step[str]], record: AgentToolCall, maximum_attempts: int
    ) -> StepMovement[str]:
        """A tool call Step with the tool call limit and the failure route of the call's effect:
        ``RecordToolOutcomeUnknown`` for single-attempt effects, else ``RecordToolFailure``."""
        single = tool_effect_rules(record.effect).step_type is ToolStepType.CALL_SINGLE_ATTEMPT_TOOL
        failure_route = (
            self._steps.record_tool_outcome_unknown if single else self._steps.record_tool_failure
        )
        return StepMovement.of(
            step,
            record.tool_call_id,
            options=tool_call_step_options(
                record.tool_call_id,
                limit=self._options.tool_call_limit,
                maximum_attempts=maximum_attempts,
                failure_route=failure_route,
            ),
        )
