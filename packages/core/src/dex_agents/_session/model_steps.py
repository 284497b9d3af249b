"""The Steps that make model calls: ``RunModel`` and ``CompactContext``.

``RunModel`` makes the turn's next model call through ``run_model_step``: it completes the turn,
or records the requested tool calls and moves to one Step per call plus ``ResumeTurn``. Before
the call it ends a steered or cancelled turn, moves to ``CompactContext`` when the compaction
policy's threshold is crossed, and asks the spend limit. ``CompactContext`` makes the one summary
call of a compaction and moves back to ``RunModel``.
"""

from __future__ import annotations

from dataclasses import replace

from dex import AsyncContext, StepDecision, StepOptions, go_to_many

from dex_agents._compaction import messages_to_summarize, next_context_summary
from dex_agents._event_writer import AgentEventWriter, write_event_payload
from dex_agents._events import (
    CompactionFinishedPayload,
    CompactionStartedPayload,
    InterruptRaisedPayload,
    ToolCallDeferredPayload,
    TurnCompletedPayload,
)
from dex_agents._runner_contract import (
    AgentTurnContext,
    ContextSummaryRequest,
    ToolCallsRequested,
    TurnCompleted,
    validate_tool_calls_requested,
)
from dex_agents._session.built_in_calls import commit_call_settlements
from dex_agents._session.built_in_transitions import settle_requested_calls
from dex_agents._session.compaction import (
    CompactContextInput,
    decide_turn_compaction,
    warn_when_messages_were_deleted,
)
from dex_agents._session.control import end_turn_under_control, turn_control_reason_now
from dex_agents._session.heartbeat import Heartbeat
from dex_agents._session.message_store import load_messages
from dex_agents._session.persistence import (
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    CONTEXT_SUMMARY,
    FRAMEWORK_RUN_STATE,
    PENDING_INTERRUPTS,
    TURN_SESSION_SETTINGS,
)
from dex_agents._session.records import record_usage
from dex_agents._session.settings import session_settings_of_turn
from dex_agents._session.size_budgets import oversized_outcome_problem, summary_text_problem
from dex_agents._session.spend import (
    model_call_identity,
    refused_model_call_error,
    report_model_spend,
)
from dex_agents._session.step_base import SessionStep
from dex_agents._session.tracing import (
    activation_root,
    complete_model_call_span,
    complete_summary_call_span,
    model_call_span,
    summary_call_span,
)
from dex_agents._session.transitions import (
    RequestedToolCall,
    complete_turn,
    interrupt_for_approval,
    new_tool_call_record,
)
from dex_agents._session.turns import (
    build_turn_context,
    clear_turn_records,
    fail_active_turn,
    store_messages,
)
from dex_agents._spend_limit import ModelCallKind
from dex_agents._tracing.session_tracing import ModelCallSpan
from dex_agents._values import AgentState, AgentStatus
from dex_agents.exceptions import RunnerContractError

__all__ = ["CompactContext", "RunModel"]


class RunModel(SessionStep[None]):
    """Makes the turn's next model call through ``run_model_step``.

    15 min timeout, 2 min heartbeat timeout, 3 attempts in 30 min (``run_model_limit``), failure
    route ``RecordTurnFailure``.
    """

    def get_step_options(self) -> StepOptions | None:
        return self._runtime.movements.run_model_options()

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # type: ignore[override]
        runtime = self._runtime
        state = AGENT_STATE.get(context)
        if state is None or state.active_turn_id is None:
            return go_to_many(runtime.movements.await_user_message())
        reason = turn_control_reason_now(context, state)
        if reason is not None:
            # A steered or cancelled turn ends here, before another model call.
            return end_turn_under_control(context, runtime, state, reason)
        runner_events = runtime.event_writer(context, state.active_turn_id)
        heartbeat = Heartbeat(context)
        # Nothing is written yet, so the decoded-message cache may serve this read.
        turn = build_turn_context(
            context, runtime, state, runner_events, heartbeat, message_cache=runtime.message_cache
        )
        through_sequence = await decide_turn_compaction(runtime.runner, runtime.options, turn)
        if through_sequence is not None:
            runner_events.close()
            AGENT_STATE.set(context, replace(state, status=AgentStatus.COMPACTING_CONTEXT))
            return go_to_many(runtime.movements.compact_context(context, through_sequence))
        warn_when_messages_were_deleted(context, runtime.runner, runtime.options)
        spend_call = model_call_identity(
            context, runtime, turn.turn_id, turn.session_settings, ModelCallKind.TURN
        )
        refusal = await refused_model_call_error(runtime, spend_call)
        if refusal is not None:
            runner_events.close()
            events = runtime.event_writer(context, state.active_turn_id)
            return fail_active_turn(context, runtime, state, refusal, events)
        span = model_call_span(context, runtime, type(self).__name__, turn)
        outcome = await runtime.runner.run_model_step(turn, heartbeat, span)
        events = runtime.event_writer(context, state.active_turn_id)
        await report_model_spend(runtime, spend_call, outcome.usage)
        too_large = oversized_outcome_problem(outcome)
        if too_large is not None:
            # Seeds: a message too large to store fails this turn at once, never the session.
            record_usage(context, events, outcome.usage)
            span.completed(outcome.usage, outcome.model_call_metadata)
            return fail_active_turn(context, runtime, state, too_large, events)
        if isinstance(outcome, TurnCompleted):
            return self._complete(context, state, turn, outcome, events, span)
        return self._defer_tool_calls(context, state, turn, outcome, events, span)

    def _complete(
        self,
        context: AsyncContext,
        state: AgentState,
        turn: AgentTurnContext,
        outcome: TurnCompleted,
        events: AgentEventWriter,
        span: ModelCallSpan,
    ) -> StepDecision:
        record_usage(context, events, outcome.usage)
        state, stored = store_messages(
            context,
            self._runtime,
            state,
            outcome.new_messages,
            turn_id=turn.turn_id,
            tool_calls=turn.tool_calls,
        )
        clear_turn_records(context, turn.tool_calls)
        AGENT_STATE.set(context, complete_turn(state))
        write_event_payload(events, TurnCompletedPayload(message_count=state.last_message_sequence))
        complete_model_call_span(span, outcome, stored)
        return go_to_many(self._runtime.movements.await_user_message())

    def _defer_tool_calls(
        self,
        context: AsyncContext,
        state: AgentState,
        turn: AgentTurnContext,
        outcome: ToolCallsRequested,
        events: AgentEventWriter,
        span: ModelCallSpan,
    ) -> StepDecision:
        runtime = self._runtime
        record_usage(context, events, outcome.usage)
        problem = self._contract_problem(turn, outcome)
        if problem is not None:
            # A runner defect: retrying the same model call cannot fix it.
            span.completed(outcome.usage, outcome.model_call_metadata)
            return fail_active_turn(context, runtime, state, problem, events)
        now = runtime.now()
        state, stored = store_messages(
            context,
            runtime,
            state,
            outcome.new_messages,
            turn_id=turn.turn_id,
            now=now,
            tool_calls=turn.tool_calls,
        )
        first_order = len(turn.tool_calls)
        # Each record carries the activation's root, so its tool Steps join this trace.
        root = activation_root(context)
        records = [
            replace(
                new_tool_call_record(
                    RequestedToolCall(
                        call.tool_call_id,
                        call.tool_name,
                        call.arguments,
                        call.policy,
                        call.tool_source_reference,
                    ),
                    turn_id=turn.turn_id,
                    deferral_order=first_order + index,
                    now=now,
                ),
                trace_context=root,
            )
            for index, call in enumerate(outcome.tool_calls)
        ]
        settlements = settle_requested_calls(
            records,
            enabled_built_in_tools=runtime.options.built_in_tools,
            interaction_mode=state.interaction_mode,
            plan=turn.plan,
            max_durable_wait=runtime.options.max_durable_wait,
            interrupt_deadline=runtime.options.interrupt_deadline,
            now=now,
        )
        records = [settlement.record for settlement in settlements]
        interrupts = list(PENDING_INTERRUPTS.get(context) or [])
        for record in records:
            AGENT_TOOL_CALLS.set(context, record.tool_call_id, record)
            write_event_payload(events, ToolCallDeferredPayload.of(record))
            if record.requires_approval:
                interrupt = interrupt_for_approval(
                    record, now=now, deadline_after=runtime.options.interrupt_deadline
                )
                interrupts.append(interrupt)
                write_event_payload(events, InterruptRaisedPayload.of(interrupt, record))
        interrupts.extend(commit_call_settlements(context, events, settlements))
        PENDING_INTERRUPTS.set(context, interrupts)
        FRAMEWORK_RUN_STATE.set(context, outcome.framework_run_state)
        AGENT_STATE.set(context, replace(state, status=AgentStatus.RUNNING_TOOLS))
        complete_model_call_span(span, outcome, stored)
        movements = runtime.movements
        return go_to_many(
            *(movements.for_record(record) for record in records if not record.is_final),
            movements.resume_turn(len(records)),
        )

    def _contract_problem(self, turn: AgentTurnContext, outcome: ToolCallsRequested) -> str | None:
        try:
            validate_tool_calls_requested(outcome, turn)
        except RunnerContractError as error:
            return f"the runner broke the runner contract: {error}"
        if outcome.new_messages and not self._runtime.runner.builds_unfinished_turn_messages:
            return (
                "the runner broke the runner contract: ToolCallsRequested.new_messages needs "
                "build_unfinished_turn_messages"
            )
        return None


class CompactContext(SessionStep[CompactContextInput]):
    """Summarizes the messages through ``through_sequence`` and stores ``ContextSummary``.

    Calls ``summarize_context`` once per attempt, with ``RunModel``'s timeouts, attempts, and
    failure route, then moves back to ``RunModel``.
    """

    def get_step_options(self) -> StepOptions | None:
        return self._runtime.movements.compact_context_options()

    async def execute(self, context: AsyncContext, input: CompactContextInput) -> StepDecision:  # type: ignore[override]
        runtime = self._runtime
        state = AGENT_STATE.get(context)
        if state is None or state.active_turn_id is None:
            return go_to_many(runtime.movements.await_user_message())
        previous = CONTEXT_SUMMARY.get(context)
        policy = runtime.options.compaction
        if policy is None or (
            previous is not None and input.through_sequence <= previous.last_sequence
        ):
            # Nothing new to summarize (the policy was removed, or a summary already covers it).
            AGENT_STATE.set(context, replace(state, status=AgentStatus.RUNNING_MODEL))
            return go_to_many(runtime.movements.run_model(context))
        after = previous.last_sequence if previous is not None else None
        messages = load_messages(context, after_sequence=after)
        events = runtime.event_writer(context, state.active_turn_id)
        write_event_payload(
            events, CompactionStartedPayload(through_sequence=input.through_sequence)
        )
        request = ContextSummaryRequest(
            flow_id=context.flow_id,
            turn_id=state.active_turn_id,
            attempt=max(context.attempt, 1),
            previous_summary=previous,
            messages=messages_to_summarize(messages, previous, input.through_sequence),
            input_token_budget=policy.context_window_tokens,
            session_settings=session_settings_of_turn(
                TURN_SESSION_SETTINGS.get(context), state.active_turn_id
            ),
            events=events,
        )
        # The summary is a model call too: the spend limit is asked first and told what it used.
        spend_call = model_call_identity(
            context,
            runtime,
            request.turn_id,
            request.session_settings,
            ModelCallKind.CONTEXT_SUMMARY,
        )
        refusal = await refused_model_call_error(runtime, spend_call)
        if refusal is not None:
            return fail_active_turn(context, runtime, state, refusal, events)
        span = summary_call_span(context, runtime, type(self).__name__, request)
        result = await runtime.runner.summarize_context(request, Heartbeat(context), span)
        await report_model_spend(runtime, spend_call, result.usage)
        too_large = summary_text_problem(result.text)
        if too_large is not None:
            # Like a model answer too large to store: this turn fails at once, not the session.
            record_usage(context, events, result.usage)
            complete_summary_call_span(span, result)
            return fail_active_turn(context, runtime, state, too_large, events)
        summary = next_context_summary(
            previous,
            text=result.text,
            through_sequence=input.through_sequence,
            created_at=runtime.now(),
        )
        CONTEXT_SUMMARY.set(context, summary)
        record_usage(context, events, result.usage)
        running = replace(state, status=AgentStatus.RUNNING_MODEL)
        # No new message: this applies retention now that the summary covers more.
        running, _ = store_messages(context, runtime, running, (), turn_id=state.active_turn_id)
        AGENT_STATE.set(context, running)
        write_event_payload(
            events,
            CompactionFinishedPayload(
                generation=summary.generation, through_sequence=summary.last_sequence
            ),
        )
        complete_summary_call_span(span, result)
        return go_to_many(runtime.movements.run_model(context))
