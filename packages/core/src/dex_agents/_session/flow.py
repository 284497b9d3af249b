"""``AgentSessionFlow``: one durable agent session per Flow execution, on any runner.

Every model call is one ``RunModel`` Step and every tool call its own Step, so a crash repeats at
most the one call that was running. The Flow ID is the session ID. A session never completes by
itself; stop it with ``AsyncClient.stop_flow``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dex import Context, Flow, PersistenceSchema, RPCResult, StepList, Stream, rpc

from dex_agents._events import AgentEvent
from dex_agents._runner_contract import AgentFrameworkRunner, runner_supports_plan_mode
from dex_agents._session import rpcs as _turn_control_rpcs
from dex_agents._session.built_in_transitions import decide_question_answer
from dex_agents._session.compaction_steps import CompactContext, require_compaction_runner
from dex_agents._session.control_steps import (
    ApplyTurnControl,
    FinishTurnCancellation,
    finish_turn_cancellation_movement,
)
from dex_agents._session.message_store import load_newest_messages, page_messages
from dex_agents._session.options import AgentSessionOptions
from dex_agents._session.persistence import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGES,
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    AGENT_USAGE,
    CONTEXT_SUMMARY,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    PENDING_PLAN_EXECUTION,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
    agent_event_stream,
    agent_session_persistence_schema,
)
from dex_agents._session.plans import accept_plan_execution
from dex_agents._session.step_support import SessionRuntime, tool_calls_in_order
from dex_agents._session.task_steps import CancelToolTask, PollToolTask
from dex_agents._session.tool_steps import (
    AwaitToolApproval,
    CallSingleAttemptTool,
    CallTool,
    RecordToolFailure,
    RecordToolOutcomeUnknown,
)
from dex_agents._session.transitions import decide_interrupt_resolution
from dex_agents._session.turn_control_rules import CancelTurnDecision
from dex_agents._session.turn_steps import (
    AwaitUserMessage,
    RecordTurnFailure,
    ResumeTurn,
    RunModel,
    StartAgentSession,
)
from dex_agents._session.wait_steps import AwaitQuestionAnswer, AwaitTimer
from dex_agents._values import (
    SNAPSHOT_MESSAGE_LIMIT,
    AgentMessagesPage,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentUserMessage,
    AnswerQuestionRequest,
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    ExecutePlanRequest,
    ListAgentMessagesRequest,
    QueuedUserMessage,
    ResolveInterruptRequest,
    SteerUserMessageRequest,
    UpdateSessionSettingsRequest,
    empty_agent_usage,
)

__all__ = ["AgentSessionFlow"]


class AgentSessionFlow(Flow[AgentSessionStartInput]):
    """The durable agent session Flow of one agent, driven by a framework runner.

    Register one per agent, each with its own ``flow_type``, in a
    ``Registry([flow], allow_async_handlers=True)`` served by an ``AsyncWorker``. Give the Worker
    enough task slots for the largest batch of parallel tool calls a model makes.

    Args:
        runner: The ``AgentFrameworkRunner`` that makes model calls and runs tools.
        flow_type: The Dex Flow type, unique per agent.
        options: Tool policies, limits, and deadlines.

    Raises:
        TypeError: When ``runner`` lacks a runner method or ``options`` is not AgentSessionOptions.
        ValueError: When ``flow_type`` is blank.

    Example:
        >>> flow = AgentSessionFlow(
        ...     MyFrameworkRunner(agent),
        ...     flow_type="TriageAgent",
        ...     options=AgentSessionOptions(tool_policies={"search": ToolPolicy(ToolEffect.READ)}),
        ... )
        >>> registry = Registry([flow], allow_async_handlers=True)
    """

    def __init__(
        self,
        runner: AgentFrameworkRunner[Any],
        *,
        flow_type: str,
        options: AgentSessionOptions | None = None,
    ) -> None:
        for method in ("build_user_message", "run_model_step", "execute_deferred_tool_call"):
            if not callable(getattr(runner, method, None)):
                raise TypeError(f"runner {type(runner).__name__} has no {method} method")
        if not isinstance(flow_type, str) or not flow_type.strip():
            raise ValueError(f"flow_type must be a non-blank string, got {flow_type!r}")
        resolved = options if options is not None else AgentSessionOptions()
        if not isinstance(resolved, AgentSessionOptions):
            raise TypeError(f"options must be AgentSessionOptions, got {type(resolved).__name__}")
        self._flow_type = flow_type
        self._events = agent_event_stream(resolved.event_stream_capacity_bytes)
        require_compaction_runner(runner, resolved.compaction)
        if resolved.plan_mode_enabled and not runner_supports_plan_mode(runner):
            raise TypeError(
                f"plan_mode_enabled needs a PlanModeRunner: runner {type(runner).__name__} "
                "does not set supports_plan_mode = True"
            )
        self._runtime = SessionRuntime(
            runner=runner, options=resolved, events=self._events, flow_type=flow_type
        )

    @property
    def runner(self) -> AgentFrameworkRunner[Any]:
        """The runner this Flow type calls."""
        return self._runtime.runner

    @property
    def options(self) -> AgentSessionOptions:
        """The session options of this Flow type."""
        return self._runtime.options

    @property
    def agent_events(self) -> Stream[AgentEvent]:
        """This Flow type's AgentEvents Stream; read it with ``AsyncClient.read_stream``."""
        return self._events

    def get_flow_type(self) -> str:
        return self._flow_type

    def get_steps(self) -> StepList[AgentSessionStartInput]:
        runtime = self._runtime
        return StepList.start_step(StartAgentSession(runtime)).other_steps(
            AwaitUserMessage(runtime),
            RunModel(runtime),
            AwaitToolApproval(runtime),
            CallTool(runtime),
            CallSingleAttemptTool(runtime),
            RecordToolFailure(runtime),
            RecordToolOutcomeUnknown(runtime),
            ResumeTurn(runtime),
            RecordTurnFailure(runtime),
            CompactContext(runtime),
            AwaitQuestionAnswer(runtime),
            AwaitTimer(runtime),
            PollToolTask(runtime),
            CancelToolTask(runtime),
            ApplyTurnControl(runtime),
            FinishTurnCancellation(runtime),
        )

    def get_persistence_schema(self) -> PersistenceSchema:
        return agent_session_persistence_schema(self._events)

    @rpc(is_transactional=True)
    def send_user_message(self, context: Context, message: AgentUserMessage) -> RPCResult[bool]:
        """Queue a user message for the next turn; ``False`` for blank text or ``plan_mode``
        (plan mode is off)."""
        if not message.text.strip():
            return RPCResult(False)
        if message.plan_mode and not self._runtime.options.plan_mode_enabled:
            return RPCResult(False)
        QUEUED_USER_MESSAGES.publish(context, message)
        return RPCResult(True)

    @rpc(
        lock_attributes=(PENDING_PLAN_EXECUTION.lock(),),
        load_channels=(QUEUED_USER_MESSAGES, STEERED_USER_MESSAGES),
    )
    def execute_plan(self, context: Context, request: ExecutePlanRequest) -> RPCResult[bool]:
        """Approve plan revision ``request.revision`` for execution; ``True`` only while the
        session waits for a user message, the plan has that revision and is draft or active, no
        execution of it is pending, and nothing is queued, steered, or pending."""
        return RPCResult(accept_plan_execution(context, request))

    @rpc(lock_attributes=(PENDING_INTERRUPTS.lock(),))
    def answer_question(self, context: Context, request: AnswerQuestionRequest) -> RPCResult[bool]:
        """Answer a pending question; ``False`` when it is not a pending question, is past its
        deadline, or the answer is blank or not an allowed choice. Removes the interrupt and
        publishes the answer in one commit."""
        interrupts = PENDING_INTERRUPTS.get(context) or []
        decision = decide_question_answer(interrupts, request, datetime.now(UTC))
        if decision.resolution is None:
            return RPCResult(False)
        PENDING_INTERRUPTS.set(context, list(decision.remaining_interrupts))
        INTERRUPT_RESOLUTIONS.publish(context, request.interrupt_id, decision.resolution)
        return RPCResult(True)

    @rpc(lock_attributes=(PENDING_INTERRUPTS.lock(),))
    def resolve_interrupt(
        self, context: Context, request: ResolveInterruptRequest
    ) -> RPCResult[bool]:
        """Approve or reject a pending approval; ``False`` when it is not pending or past its
        deadline. Removes the interrupt and publishes the answer in one commit."""
        interrupts = PENDING_INTERRUPTS.get(context) or []
        decision = decide_interrupt_resolution(interrupts, request, datetime.now(UTC))
        if decision.resolution is None:
            return RPCResult(False)
        PENDING_INTERRUPTS.set(context, list(decision.remaining_interrupts))
        INTERRUPT_RESOLUTIONS.publish(context, request.interrupt_id, decision.resolution)
        return RPCResult(True)

    @rpc(
        load_attribute_maps=(AGENT_MESSAGES, AGENT_MESSAGE_CHUNKS, AGENT_TOOL_CALLS),
        load_channels=(QUEUED_USER_MESSAGES, STEERED_USER_MESSAGES),
    )
    def get_agent_snapshot(self, context: Context) -> RPCResult[AgentSnapshot]:
        """Return the state, the newest 200 messages, pending interrupts, the active turn's tool
        calls, usage, and the queued messages."""
        state = AGENT_STATE.get(context)
        active_turn = state.active_turn_id if state is not None else None
        stored = load_newest_messages(
            context,
            state.last_message_sequence if state is not None else 0,
            SNAPSHOT_MESSAGE_LIMIT,
            cache=self._runtime.message_cache,
        )
        records = {
            key: AGENT_TOOL_CALLS.get(context, key)
            for key in AGENT_TOOL_CALLS.get_all_instance_keys(context)
        }
        queued = tuple(
            QueuedUserMessage(
                message_id=pending.message_id,
                text=pending.value.text,
                plan_mode=pending.value.plan_mode,
            )
            for pending in QUEUED_USER_MESSAGES.pending_messages(context)
        )
        return RPCResult(
            AgentSnapshot(
                state=state,
                messages=stored.messages,
                deleted_before_sequence=stored.deleted_before_sequence,
                context_summary=CONTEXT_SUMMARY.get(context),
                plan=AGENT_PLAN.get(context),
                pending_interrupts=tuple(PENDING_INTERRUPTS.get(context) or ()),
                tool_calls=tuple(
                    record
                    for record in tool_calls_in_order(records)
                    if record.turn_id == active_turn
                ),
                usage=AGENT_USAGE.get(context) or empty_agent_usage(),
                queued_message_count=len(queued),
                queued_messages=queued,
                steered_messages=_turn_control_rpcs.steered_messages(context),
                session_settings=_turn_control_rpcs.next_turn_session_settings(context),
            )
        )

    @rpc(load_attribute_maps=(AGENT_MESSAGES, AGENT_MESSAGE_CHUNKS))
    def list_agent_messages(
        self, context: Context, request: ListAgentMessagesRequest
    ) -> RPCResult[AgentMessagesPage]:
        """Return one page of stored messages, oldest first; ``limit`` is clamped to 1..200."""
        return RPCResult(page_messages(context, request.after_sequence, request.limit))

    @rpc(is_transactional=True, load_channels=(QUEUED_USER_MESSAGES,))
    def steer_user_message(
        self, context: Context, request: SteerUserMessageRequest
    ) -> RPCResult[bool]:
        """Steer the running turn with new text or a queued message; while no turn is active, queue
        the text. ``False`` for both or neither, blank text, a message no longer queued, or a turn
        that does not accept steering. Locks nothing."""
        return RPCResult(
            _turn_control_rpcs.steer_user_message(context, request, self._runtime.options)
        )

    @rpc(is_transactional=True, load_channels=(QUEUED_USER_MESSAGES,))
    def delete_queued_message(
        self, context: Context, request: DeleteQueuedMessageRequest
    ) -> RPCResult[bool]:
        """Delete a queued message; ``False`` for a message no longer queued. Locks nothing."""
        return RPCResult(_turn_control_rpcs.delete_queued_message(context, request))

    @rpc(lock_attributes=(TURN_CANCELLATION_REQUEST.lock(), PENDING_INTERRUPTS.lock()))
    def cancel_turn(self, context: Context, request: CancelTurnRequest) -> RPCResult[bool]:
        """Stop the running turn now with no new turn: cancels its model call, compaction, and
        waiting Steps, and moves to ``FinishTurnCancellation``. ``False`` when no turn is active,
        ``turn_id`` names another turn, or the turn does not accept cancellation; a second call
        for the same turn returns ``True`` and changes nothing."""
        decision = _turn_control_rpcs.record_turn_cancellation(context, request)
        if decision is not CancelTurnDecision.CANCEL:
            return RPCResult(decision is CancelTurnDecision.ALREADY_REQUESTED)
        return RPCResult(
            True, next_steps=(finish_turn_cancellation_movement(request.turn_id),)
        ).with_canceling_steps(
            RunModel,
            CompactContext,
            RecordTurnFailure,
            AwaitToolApproval,
            AwaitQuestionAnswer,
            AwaitTimer,
            PollToolTask,
        )

    @rpc(is_transactional=True)
    def update_session_settings(
        self, context: Context, request: UpdateSessionSettingsRequest
    ) -> RPCResult[bool]:
        """Replace the session settings the next turn starts with (``{}`` clears them). ``False``
        before the session initialized, for ``None``, or beyond the size limit plus tolerance."""
        return RPCResult(_turn_control_rpcs.update_session_settings(context, request))
