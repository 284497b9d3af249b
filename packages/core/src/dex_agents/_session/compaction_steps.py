"""Compaction in the session Flow: ``RunModel -> CompactContext(through_sequence) -> RunModel``.

Before each model call of a session with a compaction policy, ``RunModel`` asks the runner for
``estimate_input_tokens(turn)``; at the policy's trigger it asks for
``select_compaction_cutoff(turn, retained_token_budget)``, and a cutoff past the current summary
moves the session to ``CompactContext`` with status ``compacting_context`` and no model call.
``CompactContext`` calls ``summarize_context`` once, stores the next ``ContextSummary``, records
the call's usage, writes ``compaction_started`` and ``compaction_finished``, applies retention, and
moves back to ``RunModel``. It has ``RunModel``'s timeouts, retries, and failure route
(``RecordTurnFailure``), so a crash reruns only the summary call. A second high estimate finds no new
cutoff, so the pair cannot loop.

``RunModel`` and its movements live in :mod:`dex_agents._session.turn_steps`, which imports this
module; this module reaches them through :func:`_turn_steps` at call time.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, replace
from typing import Final

from dex import AsyncContext, Step, StepDecision, StepMovement, StepOptions, go_to, go_to_many

from dex_agents._compaction import (
    compaction_through_sequence,
    messages_to_summarize,
    next_context_summary,
)
from dex_agents._events import AgentEventType
from dex_agents._json_values import WireValue, resolve_wire_value_annotations
from dex_agents._runner_contract import (
    AgentTurnContext,
    ContextCompactionRunner,
    ContextSummaryRequest,
    ContextSummaryResult,
)
from dex_agents._session.message_store import append_messages, load_messages, message_chunk_loads
from dex_agents._session.persistence import (
    AGENT_MESSAGE_INDEX,
    AGENT_STATE,
    CONTEXT_SUMMARY,
    TURN_SESSION_SETTINGS,
)
from dex_agents._session.settings import session_settings_of_turn
from dex_agents._session.step_options import (
    run_model_step_options,
    with_selected_message_chunks,
)
from dex_agents._session.step_support import Heartbeat, SessionRuntime, record_usage
from dex_agents._spend_limit import (
    ModelCallKind,
    check_model_spend,
    model_spend_limit_error,
)
from dex_agents._values import AgentState, AgentStatus, ContextSummary

__all__ = [
    "CompactContext",
    "CompactContextInput",
    "compact_context_movement",
    "decide_turn_compaction",
    "require_compaction_runner",
    "summary_of_session",
    "warn_when_messages_were_deleted",
]

_logger: Final = logging.getLogger("dex_agents.session")


@dataclass(frozen=True)
class CompactContextInput(WireValue):
    """``CompactContext``'s input: summarize every message through ``through_sequence``.

    Example:
        >>> CompactContextInput(through_sequence=42).to_json()
        {'through_sequence': 42}
    """

    through_sequence: int


def require_compaction_runner(runner: object, options_compaction: object | None) -> None:
    """Raise TypeError when a compaction policy is set for a runner that cannot compact.

    Raises:
        TypeError: When ``options_compaction`` is set and ``runner`` lacks a
            ``ContextCompactionRunner`` method.

    Example:
        >>> require_compaction_runner(StepwiseAgentRunner(agent), CompactionPolicy(400_000))
    """
    if options_compaction is None:
        return
    for method in ("estimate_input_tokens", "select_compaction_cutoff", "summarize_context"):
        if not callable(getattr(runner, method, None)):
            raise TypeError(
                f"a compaction policy needs a ContextCompactionRunner, but runner "
                f"{type(runner).__name__} has no {method} method"
            )


def summary_of_session(context: AsyncContext, runtime: SessionRuntime) -> ContextSummary | None:
    """The summary the runner sees: the stored ``ContextSummary`` when the session compacts."""
    if runtime.options.compaction is None:
        return None
    return CONTEXT_SUMMARY.get(context)


def warn_when_messages_were_deleted(context: AsyncContext, runtime: SessionRuntime) -> None:
    """Log a warning when a runner without compaction sees a session with deleted messages.

    Its input starts after them with no summary, such as after the compaction policy was removed.
    """
    if isinstance(runtime.runner, ContextCompactionRunner) and runtime.options.compaction:
        return
    index = AGENT_MESSAGE_INDEX.get(context)
    if index is not None and index.has_deleted_messages:
        _logger.warning(
            "session %s: retention deleted the messages before sequence %d and the runner %s "
            "does not compact, so its model input starts after them with no summary",
            context.flow_id,
            index.first_sequence,
            type(runtime.runner).__name__,
        )


async def decide_turn_compaction(runtime: SessionRuntime, turn: AgentTurnContext) -> int | None:
    """Return the sequence to summarize through before this model call, or ``None``.

    Asks ``estimate_input_tokens(turn)``, and at the trigger
    ``select_compaction_cutoff(turn, retained_token_budget)``; a cutoff that is not past the current
    summary means no compaction, so ``RunModel -> CompactContext`` never loops.

    Raises:
        ValueError: When the runner returns an invalid estimate or cutoff.
    """
    policy = runtime.options.compaction
    runner = runtime.runner
    if policy is None or not isinstance(runner, ContextCompactionRunner):
        return None
    if not policy.is_triggered(runner.estimate_input_tokens(turn)):
        return None
    cutoff: object = runner.select_compaction_cutoff(turn, policy.retained_token_budget)
    if inspect.isawaitable(cutoff):
        cutoff = await cutoff
    return compaction_through_sequence(
        cutoff,  # type: ignore[arg-type]  # validated there
        context_summary=turn.context_summary,
        messages=turn.messages,
    )


def compact_context_movement(
    context: AsyncContext, runtime: SessionRuntime, state: AgentState, through_sequence: int
) -> StepDecision:
    """Set status ``compacting_context`` and move to ``CompactContext`` (from ``RunModel``)."""
    AGENT_STATE.set(context, replace(state, status=AgentStatus.COMPACTING_CONTEXT))
    summary = CONTEXT_SUMMARY.get(context)
    options = with_selected_message_chunks(
        compact_context_step_options(runtime),
        message_chunk_loads(
            context, after_sequence=summary.last_sequence if summary is not None else None
        ),
    )
    return go_to_many(
        StepMovement.of(CompactContext, CompactContextInput(through_sequence), options=options)
    )


def compact_context_step_options(runtime: SessionRuntime) -> StepOptions:
    """``CompactContext``'s options: ``RunModel``'s timeouts, retries, loads, and failure route."""
    from dex_agents._session.turn_steps import RecordTurnFailure

    return run_model_step_options(runtime.options.run_model_limit, RecordTurnFailure)


class CompactContext(Step[CompactContextInput]):
    """Summarizes the messages through ``through_sequence`` and stores ``ContextSummary``.

    Calls ``summarize_context`` once per attempt, with ``RunModel``'s timeouts, attempts, and
    failure route, then moves back to ``RunModel``.
    """

    def __init__(self, runtime: SessionRuntime) -> None:
        self._runtime = runtime

    def get_step_options(self) -> StepOptions | None:
        return compact_context_step_options(self._runtime)

    async def execute(self, context: AsyncContext, input: CompactContextInput) -> StepDecision:  # type: ignore[override]
        # agent_session_steps imports this module for RunModel's decision, so import at call time.
        from dex_agents._session import turn_steps as steps

        runtime = self._runtime
        state = AGENT_STATE.get(context)
        if state is None or state.active_turn_id is None:
            return go_to(steps.AwaitUserMessage, None)
        previous = CONTEXT_SUMMARY.get(context)
        policy = runtime.options.compaction
        if policy is None or (
            previous is not None and input.through_sequence <= previous.last_sequence
        ):
            # Nothing new to summarize (the policy was removed, or a summary already covers it).
            AGENT_STATE.set(context, replace(state, status=AgentStatus.RUNNING_MODEL))
            return steps.run_model_movement(context, runtime)
        runner = runtime.runner
        if not isinstance(runner, ContextCompactionRunner):
            raise TypeError(f"runner {type(runner).__name__} is not a ContextCompactionRunner")
        after = previous.last_sequence if previous is not None else None
        messages = load_messages(context, after_sequence=after)
        events = runtime.event_writer(context, state.active_turn_id)
        events.write_event(
            AgentEventType.COMPACTION_STARTED, {"through_sequence": input.through_sequence}
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
        spend_call = steps.model_call_identity(
            context,
            runtime,
            request.turn_id,
            request.session_settings,
            ModelCallKind.CONTEXT_SUMMARY,
        )
        refusal = await check_model_spend(runtime.options.model_spend_limit, spend_call)
        if refusal is not None:
            error = model_spend_limit_error(refusal)
            return steps.fail_active_turn(context, runtime, state, error, events)
        heartbeat = Heartbeat(context)
        async with heartbeat.in_background():
            result = await runner.summarize_context(request)
        await steps.report_model_spend(runtime, spend_call, result)
        if not isinstance(result, ContextSummaryResult) or not isinstance(result.text, str):
            raise TypeError(
                "summarize_context must return a ContextSummaryResult with text, got "
                f"{type(result).__name__}"
            )
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
        running, _ = append_messages(
            context,
            running,
            (),
            turn_id=state.active_turn_id,
            now=runtime.now(),
            limits=runtime.options.message_storage_limits,
        )
        AGENT_STATE.set(context, running)
        events.write_event(
            AgentEventType.COMPACTION_FINISHED,
            {"generation": summary.generation, "through_sequence": summary.last_sequence},
        )
        return steps.run_model_movement(context, runtime)


resolve_wire_value_annotations(__name__)
