"""``AgentSessionFlow``: one durable agent session per Flow execution, on any runner.

Every model call is one ``RunModel`` Step and every tool call its own Step, so a crash repeats at
most the one call that was running. The Flow ID is the session ID. A session never completes by
itself; stop it with ``AsyncClient.stop_flow``.

This module wires the session together: it names the Step classes once
(:data:`SESSION_STEP_CLASSES`), builds the runtime every Step shares (the runner facade, the
movements, the AgentEvents Stream), and declares the RPCs, whose bodies live in
:mod:`dex_agents._session.rpcs`.
"""

from __future__ import annotations

from typing import Any, Final, cast

from dex import AsyncClient, Context, Flow, PersistenceSchema, RPCResult, StepList, Stream, rpc

from dex_agents._events import AgentEvent
from dex_agents._runner_contract import AgentFrameworkRunner
from dex_agents._sdk_task_hydration import install_sdk_hydrator_patches
from dex_agents._session import rpcs
from dex_agents._session.attempt_claims import AttemptClaimRequest, answer_attempt_claim
from dex_agents._session.control_steps import ApplyTurnControl, FinishTurnCancellation
from dex_agents._session.control_transitions import CancelTurnDecision
from dex_agents._session.message_store import page_messages
from dex_agents._session.model_steps import CompactContext, RunModel
from dex_agents._session.movements import SessionMovements, SessionStepClasses
from dex_agents._session.options import AgentSessionOptions
from dex_agents._session.persistence import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGES,
    AGENT_TOOL_CALLS,
    PENDING_INTERRUPTS,
    PENDING_PLAN_EXECUTION,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
    agent_event_stream,
    agent_session_persistence_schema,
)
from dex_agents._session.plans import accept_plan_execution
from dex_agents._session.recent_messages import RecentAgentMessages, recent_messages_page
from dex_agents._session.runner_facade import RunnerFacade
from dex_agents._session.runtime import SessionRuntime
from dex_agents._session.step_base import SessionStep
from dex_agents._session.task_steps import CancelToolTask, PollToolTask
from dex_agents._session.tool_steps import (
    CallSingleAttemptTool,
    CallTool,
    CheckToolOutcome,
    RecordToolFailure,
    RecordToolOutcomeUnknown,
)
from dex_agents._session.turn_steps import (
    AwaitUserMessage,
    RecordTurnFailure,
    ResumeTurn,
    StartAgentSession,
)
from dex_agents._session.wait_steps import AwaitQuestionAnswer, AwaitTimer, AwaitToolApproval
from dex_agents._tracing.session_tracing import SessionTracing
from dex_agents._values import (
    AgentMessagesPage,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentState,
    AgentUserMessage,
    AnswerQuestionRequest,
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    ExecutePlanRequest,
    ListAgentMessagesRequest,
    ResolveInterruptRequest,
    SteerUserMessageRequest,
    UpdateSessionSettingsRequest,
)
from dex_agents.exceptions import ConfigurationError, ConfigurationTypeError

__all__ = ["SESSION_STEP_CLASSES", "AgentSessionFlow"]

SESSION_STEP_CLASSES: Final = SessionStepClasses(
    start_agent_session=StartAgentSession,
    await_user_message=AwaitUserMessage,
    run_model=RunModel,
    compact_context=CompactContext,
    resume_turn=ResumeTurn,
    record_turn_failure=RecordTurnFailure,
    await_tool_approval=AwaitToolApproval,
    await_question_answer=AwaitQuestionAnswer,
    await_timer=AwaitTimer,
    call_tool=CallTool,
    call_single_attempt_tool=CallSingleAttemptTool,
    record_tool_failure=RecordToolFailure,
    record_tool_outcome_unknown=RecordToolOutcomeUnknown,
    poll_tool_task=PollToolTask,
    cancel_tool_task=CancelToolTask,
    apply_turn_control=ApplyTurnControl,
    finish_turn_cancellation=FinishTurnCancellation,
    check_tool_outcome=CheckToolOutcome,
)
"""Every Step class of the session Flow; the movements reach each Step through this table."""


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
        ConfigurationTypeError: When ``runner`` lacks a runner method or a capability ``options``
            need (compaction, plan mode), or ``options`` is not AgentSessionOptions.
        ConfigurationError: When ``flow_type`` is blank.

    Example:
        >>> from dex import Registry
        >>> from dex_agents import ToolEffect, ToolPolicy
        >>> flow = AgentSessionFlow(
        ...     EchoRunner(),
        ...     flow_type="TriageAgent",
        ...     options=AgentSessionOptions(tool_policies={"search": ToolPolicy(ToolEffect.READ)}),
        ... )
        >>> registry = Registry([flow], allow_async_handlers=True)
        >>> flow.get_flow_type()
        'TriageAgent'
    """

    def __init__(
        self,
        runner: AgentFrameworkRunner[Any],
        *,
        flow_type: str,
        options: AgentSessionOptions | None = None,
    ) -> None:
        facade = RunnerFacade(runner)
        if not isinstance(flow_type, str) or not flow_type.strip():
            raise ConfigurationError(
                f"flow_type must be a non-blank string naming the agent's Flow type, "
                f"got {flow_type!r}"
            )
        resolved = options if options is not None else AgentSessionOptions()
        if not isinstance(resolved, AgentSessionOptions):
            raise ConfigurationTypeError(
                f"options must be AgentSessionOptions or None, got {type(resolved).__name__}"
            )
        facade.require_capabilities(resolved)
        # get_agent_snapshot and execute_plan load two Channels: a Worker must see each
        # message with its own value (dex-python-sdk 1.23.0 can pair them crosswise), and a
        # task of inline values need not be copied value by value before its Step runs.
        install_sdk_hydrator_patches()
        self._flow_type = flow_type
        self._events = agent_event_stream(resolved.event_stream_capacity_bytes)
        self._runtime = SessionRuntime(
            runner=facade,
            options=resolved,
            events=self._events,
            movements=SessionMovements(SESSION_STEP_CLASSES, resolved),
            tracing=SessionTracing(resolved.tracing, flow_type),
            flow_type=flow_type,
        )

    @property
    def runner(self) -> AgentFrameworkRunner[Any]:
        """The runner this Flow type calls."""
        return self._runtime.runner.runner

    @property
    def options(self) -> AgentSessionOptions:
        """The session options of this Flow type."""
        return self._runtime.options

    @property
    def agent_events(self) -> Stream[AgentEvent]:
        """This Flow type's AgentEvents Stream; read it with ``AsyncClient.read_stream``."""
        return self._events

    def get_flow_type(self) -> str:
        """The Dex Flow type of this agent."""
        return self._flow_type

    def use_worker_client(self, client: AsyncClient) -> None:
        """Give the Worker serving this Flow a Dex client for tool start claims.

        Before a ``non_idempotent_write`` or ``unclassified`` tool starts, its Step claims the
        start through the ``claim_tool_attempt`` RPC, so a lost attempt whose tool never started
        runs again instead of recording ``outcome_unknown``. ``client``'s Registry must hold
        this Flow instance (the Worker's own Registry does), connected to the same Dex Server.
        Without it a Worker runs such a tool unclaimed, and a lost attempt records
        ``outcome_unknown`` (or goes to its outcome check) as before. Give every Worker of a Flow
        type a client, or none: a Worker with one takes a lost execution that made no claim
        for one that never started. ``dex-agents worker``, ``LocalRuntime`` and the
        ``dex_agents.testing`` Workers call it for you.

        Example::

            client = AsyncClient(registry, cache, ClientOptions(server_address=address))
            flow.use_worker_client(client)  # before the Worker starts
        """
        self._runtime.attempt_claims.bind(client, self.claim_tool_attempt)

    def get_steps(self) -> StepList[AgentSessionStartInput]:
        """Every Step of the session, built with this Flow's runtime."""
        runtime = self._runtime
        # Every class of the table is a SessionStep, built with the runtime.
        start, *others = (
            cast("type[SessionStep[Any]]", step)(runtime)
            for step in (SESSION_STEP_CLASSES.start_agent_session, *SESSION_STEP_CLASSES.others)
        )
        return StepList.start_step(start).other_steps(*others)

    def get_persistence_schema(self) -> PersistenceSchema:
        """Every Attribute and Channel of the session, and this Flow type's AgentEvents Stream."""
        return agent_session_persistence_schema(self._events)

    @rpc(is_transactional=True)
    def send_user_message(self, context: Context, message: AgentUserMessage) -> RPCResult[bool]:
        """Queue a user message for the next turn; ``False`` for blank text or ``plan_mode``
        (plan mode is off)."""
        return RPCResult(
            rpcs.send_user_message(context, message, self._runtime.options, self._runtime.runner)
        )

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
        return RPCResult(rpcs.answer_question(context, request))

    @rpc(lock_attributes=(PENDING_INTERRUPTS.lock(),))
    def resolve_interrupt(
        self, context: Context, request: ResolveInterruptRequest
    ) -> RPCResult[bool]:
        """Approve or reject a pending approval; ``False`` when it is not pending or past its
        deadline. Removes the interrupt and publishes the answer in one commit."""
        return RPCResult(rpcs.resolve_interrupt(context, request))

    @rpc(
        load_attribute_maps=(AGENT_MESSAGES, AGENT_MESSAGE_CHUNKS, AGENT_TOOL_CALLS),
        load_channels=(QUEUED_USER_MESSAGES, STEERED_USER_MESSAGES),
    )
    def get_agent_snapshot(self, context: Context) -> RPCResult[AgentSnapshot]:
        """Return the state, the newest 200 messages, pending interrupts, the active turn's tool
        calls, usage, and the queued messages."""
        return RPCResult(rpcs.agent_snapshot(context, self._runtime.message_cache))

    @rpc()
    def get_agent_state(self, context: Context) -> RPCResult[AgentState]:
        """Return the session's ``AgentState`` only (status, active turn, turn count, last error):
        what a client that waits for a turn needs, without the transcript a snapshot carries."""
        return RPCResult(rpcs.agent_state(context))

    @rpc(load_attribute_maps=(AGENT_MESSAGES, AGENT_MESSAGE_CHUNKS))
    def list_agent_messages(
        self, context: Context, request: ListAgentMessagesRequest
    ) -> RPCResult[AgentMessagesPage]:
        """Return one page of stored messages, oldest first; ``limit`` is clamped to 1..200."""
        return RPCResult(
            page_messages(
                context,
                request.after_sequence,
                request.limit,
                cache=self._runtime.message_cache,
            )
        )

    @rpc(load_attribute_maps=(AGENT_MESSAGES,))
    def list_recent_agent_messages(
        self, context: Context, request: ListAgentMessagesRequest
    ) -> RPCResult[RecentAgentMessages]:
        """Internal: the ``list_agent_messages`` page from the window alone, ``page=None`` when a
        kept chunk holds a message after ``after_sequence``; the turn-level calls' end read."""
        return RPCResult(recent_messages_page(context, request, self._runtime.message_cache))

    @rpc(is_transactional=True, load_channels=(QUEUED_USER_MESSAGES,))
    def steer_user_message(
        self, context: Context, request: SteerUserMessageRequest
    ) -> RPCResult[bool]:
        """Steer the running turn with new text or a queued message; while no turn is active, queue
        the text. ``False`` for both or neither, blank text, a message no longer queued, or a turn
        that does not accept steering. Locks nothing."""
        return RPCResult(
            rpcs.steer_user_message(context, request, self._runtime.options, self._runtime.runner)
        )

    @rpc(is_transactional=True, load_channels=(QUEUED_USER_MESSAGES,))
    def delete_queued_message(
        self, context: Context, request: DeleteQueuedMessageRequest
    ) -> RPCResult[bool]:
        """Delete a queued message; ``False`` for a message no longer queued. Locks nothing."""
        return RPCResult(rpcs.delete_queued_message(context, request))

    @rpc(lock_attributes=(TURN_CANCELLATION_REQUEST.lock(), PENDING_INTERRUPTS.lock()))
    def cancel_turn(self, context: Context, request: CancelTurnRequest) -> RPCResult[bool]:
        """Stop the running turn now with no new turn: cancels its model call, compaction, and
        waiting Steps, and moves to ``FinishTurnCancellation``. ``False`` when no turn is active,
        ``turn_id`` names another turn, or the turn does not accept cancellation; every further
        call for the same turn returns ``True`` and changes nothing while its cancellation is in
        flight (``False`` once the turn ended)."""
        decision = rpcs.record_turn_cancellation(context, request)
        if decision is not CancelTurnDecision.CANCEL:
            return RPCResult(decision is CancelTurnDecision.ALREADY_REQUESTED)
        movements = self._runtime.movements
        return RPCResult(
            True, next_steps=(movements.finish_turn_cancellation(request.turn_id),)
        ).with_canceling_steps(*movements.steps_cancel_turn_cancels())

    @rpc(is_transactional=True)
    def claim_tool_attempt(self, context: Context, request: str) -> RPCResult[str]:
        """Internal: claim or fence one Step execution's start of a single-attempt tool call
        (JSON text in and out). Invoked by the Worker with the call's
        ``AgentToolAttemptClaims`` instance locked and loaded (see ``use_worker_client``)."""
        return RPCResult(answer_attempt_claim(context, AttemptClaimRequest.from_text(request)))

    @rpc(is_transactional=True)
    def update_session_settings(
        self, context: Context, request: UpdateSessionSettingsRequest
    ) -> RPCResult[bool]:
        """Replace the session settings the next turn starts with (``{}`` clears them). ``False``
        before the session initialized, for ``None``, or beyond the size limit plus tolerance."""
        return RPCResult(rpcs.update_session_settings(context, request))
