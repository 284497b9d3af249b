"""The runner contract: what a framework adapter implements and what the session hands it.

An adapter implements :class:`AgentFrameworkRunner`, three methods that the session Flow calls from
its Steps, so each call may run again after a crash or retry:

- ``build_user_message(text)`` turns user text into the framework's user message;
- ``run_model_step(turn)`` makes at most one model call and returns :class:`TurnCompleted` or
  :class:`ToolCallsRequested` (every tool call the model asked for, each run later in its own Step);
- ``execute_deferred_tool_call(call)`` runs one of those tool calls in ``CallTool`` or
  ``CallSingleAttemptTool``.

Optional capabilities are separate protocols the Flow tests with ``isinstance``:
:class:`UnfinishedTurnMessageBuilder`, :class:`ToolTaskPoller`, :class:`ToolTaskCanceller`,
:class:`ContextCompactionRunner`, and :class:`PlanModeRunner`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Final, TypeAlias

from typing_extensions import Protocol, TypeVar, runtime_checkable

from dex_agents._event_writer import (
    AgentEventWriter,
)
from dex_agents._tool_policy import (
    DEFAULT_TOOL_EFFECT,
    ResolvedToolPolicy,
    ToolEffect,
    ToolPolicy,
    resolve_tool_policy,
)
from dex_agents._values import (
    AgentMessage,
    AgentPlan,
    AgentToolCall,
    AgentToolCallRecord,
    AgentToolCallStatus,
    AgentUsage,
    CancellationReason,
    ContextSummary,
    FrameworkMessage,
    InteractionMode,
    MessageRole,
    QuestionAnswer,
)
from dex_agents.exceptions import ConfigurationError, RunnerContractError, ToolExecutionError

__all__ = [
    "MISSING_TOOL_TASK_POLLER",
    "OUTCOME_UNKNOWN_TOOL_RESULT",
    "STEERED_TOOL_RESULT",
    "TOOL_CALL_NOT_RUN_ERROR_PREFIX",
    "TURN_CANCELLED_NOTE",
    "TURN_CANCELLED_TOOL_RESULT",
    "TURN_FAILURE_NOTE_FOOTER",
    "TURN_FAILURE_NOTE_HEADER",
    "AgentFrameworkRunner",
    "AgentTurnContext",
    "AgentTurnOutcome",
    "ContextCompactionRunner",
    "ContextSummaryRequest",
    "ContextSummaryResult",
    "DeferredToolCall",
    "DeferredToolExecution",
    "DeferredToolOutcome",
    "FrameworkMessage",
    "HeartbeatFunction",
    "MessageRole",
    "ModelCallMetadata",
    "PlanModeRunner",
    "ToolCallsRequested",
    "ToolExecutionError",
    "ToolExecutionResult",
    "ToolInputRequested",
    "ToolOutcomeT",
    "ToolTaskCancellation",
    "ToolTaskCanceller",
    "ToolTaskPending",
    "ToolTaskPoll",
    "ToolTaskPollOutcome",
    "ToolTaskPoller",
    "ToolTaskStarted",
    "TurnCompleted",
    "UnfinishedTurnMessageBuilder",
    "build_turn_cancelled_note",
    "build_turn_failure_note",
    "describe_tool_call_outcome",
    "runner_supports_plan_mode",
    "tool_call_idempotency_key",
    "tool_call_not_run_error",
    "validate_tool_calls_requested",
]

TOOL_CALL_NOT_RUN_ERROR_PREFIX: Final = "the tool did not run, so it is safe to call again"
"""Start of the error of a call whose tool Step never reached a Worker (``NOT_STARTED``)."""
MISSING_TOOL_TASK_POLLER: Final = (
    "the tool started a task, but the runner does not implement poll_tool_task"
)
"""Error of a call that returned :class:`ToolTaskStarted` from a runner without a poller."""
OUTCOME_UNKNOWN_TOOL_RESULT: Final = (
    "The outcome of this tool call is unknown: it may or may not have taken effect. "
    "Check before you call it again."
)
"""Model-visible result of an ``outcome_unknown`` call, and of a stored call without a result."""
STEERED_TOOL_RESULT: Final = '{"status":"cancelled","reason":"superseded_by_steered_user_message"}'
"""Model-visible result of a call that steering settled before it started."""
TURN_CANCELLED_TOOL_RESULT: Final = '{"status":"cancelled","reason":"turn_cancelled_by_user"}'
"""Model-visible result of a call that ``cancel_turn`` settled before it started."""
TURN_FAILURE_NOTE_HEADER: Final = "[Dex] The previous turn failed after these tool calls ran:"
"""First line of :func:`build_turn_failure_note`."""
TURN_FAILURE_NOTE_FOOTER: Final = "Do not repeat these tool calls unless the user asks again."
"""Last line of :func:`build_turn_failure_note`."""
TURN_CANCELLED_NOTE: Final = (
    "[Dex] The user stopped the previous turn before it finished; its answer was not sent."
)
"""First line of :func:`build_turn_cancelled_note`: the note a cancelled turn ends with, so the
next turn's model does not see a user message as if it were still unanswered."""

HeartbeatFunction: TypeAlias = Callable[[], Awaitable[None]]
"""Records one heartbeat of the current Step attempt."""


async def _no_heartbeat() -> None:
    return None


async def _no_checkpoint(checkpoint: str) -> None:
    del checkpoint


class _Heartbeating:
    """What every Step input that records heartbeats does alike."""

    send_heartbeat: HeartbeatFunction

    async def heartbeat(self) -> None:
        """Record a heartbeat; the session already records one every 20 seconds."""
        await self.send_heartbeat()


class _ToolCallStepInput(_Heartbeating):
    """What the inputs of a tool call's Steps (run, poll, cancel) share."""

    flow_id: str
    tool_call: AgentToolCall

    @property
    def idempotency_key(self) -> str:
        """``<flow_id>/<turn_id>/<tool_call_id>``, the key the tool Step passed on every attempt."""
        return tool_call_idempotency_key(
            self.flow_id, self.tool_call.turn_id, self.tool_call.tool_call_id
        )


def tool_call_idempotency_key(flow_id: str, turn_id: str, tool_call_id: str) -> str:
    """Return the stable key of one tool call, ``<flow_id>/<turn_id>/<tool_call_id>``.

    It is identical across attempts; the turn ID keeps keys distinct when a framework reuses tool
    call IDs across turns.

    Example:
        >>> tool_call_idempotency_key("session-42", "turn-3", "call_7")
        'session-42/turn-3/call_7'
    """
    return f"{flow_id}/{turn_id}/{tool_call_id}"


def tool_call_not_run_error(detail: str) -> str:
    """Return the error of a call whose tool never ran: the prefix, ``": "``, and ``detail``.

    Example:
        >>> tool_call_not_run_error("no Worker took the task")
        'the tool did not run, so it is safe to call again: no Worker took the task'
    """
    return f"{TOOL_CALL_NOT_RUN_ERROR_PREFIX}: {detail}"


@dataclass(frozen=True)
class ModelCallMetadata:
    """Model and response of one model call, for the ``chat`` span; never stored.

    Leave a field ``None`` when the framework does not expose it.

    Example:
        >>> ModelCallMetadata(request_model="gpt-5", provider_name="openai").request_model
        'gpt-5'
    """

    request_model: str | None = None
    response_model: str | None = None
    provider_name: str | None = None
    response_id: str | None = None
    finish_reasons: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "finish_reasons", tuple(self.finish_reasons))


@dataclass(frozen=True)
class DeferredToolCall:
    """One tool call the model requested; it runs in its own Step.

    Attributes:
        tool_call_id: Framework tool call ID: non-empty, no ``/``, unique within the turn.
        tool_name: Tool name.
        arguments: Tool arguments as JSON text.
        policy: From ``AgentTurnContext.resolve_tool_policy``; it decides approval and the Step.
        tool_source_reference: Opaque text stored on the call's record, so the tool's source
            resolves the tool in the tool Step without listing it again.

    Example:
        >>> DeferredToolCall("call_1", "search", "{}", ResolvedToolPolicy(ToolEffect.READ, False)).tool_name
        'search'
    """

    tool_call_id: str
    tool_name: str
    arguments: str
    policy: ResolvedToolPolicy
    tool_source_reference: str | None = None


@dataclass(frozen=True)
class TurnCompleted:
    """Outcome of a model call that produced the turn's final answer.

    Attributes:
        new_messages: Every message of the turn the session has not stored yet, in order: model
            output, tool requests, tool results, and the final answer. Stored in one commit.
        usage: Usage of this model call only.
        model_call_metadata: Model and response, for the ``chat`` span.

    Example:
        >>> answer = FrameworkMessage(role=MessageRole.ASSISTANT, framework_item="{}", text="Done")
        >>> TurnCompleted(new_messages=[answer], usage=AgentUsage()).new_messages[0].text
        'Done'
    """

    new_messages: Sequence[FrameworkMessage]
    usage: AgentUsage
    model_call_metadata: ModelCallMetadata | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "new_messages", tuple(self.new_messages))


@dataclass(frozen=True)
class ToolCallsRequested:
    """Outcome of a model call that requested tool calls.

    Attributes:
        framework_run_state: Non-empty serialized framework state the next ``RunModel`` continues
            from, kept opaquely in ``FrameworkRunState``.
        tool_calls: Every tool call of the model response, at least one, in model order.
        usage: Usage of this model call only.
        new_messages: Messages to store now, in the commit that records the tool calls; a runner
            that sets them implements :class:`UnfinishedTurnMessageBuilder`.
        model_call_metadata: Model and response, for the ``chat`` span.
    """

    framework_run_state: str
    tool_calls: Sequence[DeferredToolCall]
    usage: AgentUsage
    new_messages: Sequence[FrameworkMessage] = ()
    model_call_metadata: ModelCallMetadata | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        object.__setattr__(self, "new_messages", tuple(self.new_messages))


AgentTurnOutcome: TypeAlias = TurnCompleted | ToolCallsRequested
"""Result of ``run_model_step``."""


@dataclass(frozen=True)
class ToolExecutionResult:
    """Successful result of one deferred tool call: the output text the model sees."""

    output: str


@dataclass(frozen=True)
class ToolInputRequested:
    """Result of a tool call that needs an answer from the user before it takes any effect.

    The tool Step records ``awaiting_answer``; ``AwaitQuestionAnswer`` raises the question interrupt
    ``<tool_call_id>-input-<n>``, and after the answer the same tool Step type runs the call again
    with every answer in ``DeferredToolExecution.input_answers``.

    Raises:
        ConfigurationError: When ``question`` is blank.

    Example:
        >>> ToolInputRequested("Ship to the saved address?", choices=("yes", "no"), allows_free_text=False).choices
        ('yes', 'no')
    """

    question: str
    choices: tuple[str, ...] = ()
    allows_free_text: bool = True
    continuation: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.question, str) or not self.question.strip():
            raise ConfigurationError("ToolInputRequested.question must not be blank")
        object.__setattr__(self, "choices", tuple(self.choices))


@dataclass(frozen=True)
class ToolTaskStarted:
    """Result of a tool call that started remote work, which ``poll_tool_task`` polls.

    Attributes:
        task_id: Handle of the remote work, stored as the record's ``task_id``.
        poll_interval_seconds: Seconds before the first poll; rounded up to whole seconds, 1 to a day.

    Raises:
        ConfigurationError: When ``task_id`` is blank or the interval is not a positive number.
    """

    task_id: str
    poll_interval_seconds: float

    def __post_init__(self) -> None:
        if not isinstance(self.task_id, str) or not self.task_id.strip():
            raise ConfigurationError("ToolTaskStarted.task_id must not be blank")
        _require_poll_interval(self.poll_interval_seconds, "ToolTaskStarted")


@dataclass(frozen=True)
class ToolTaskPending:
    """Result of ``poll_tool_task`` while the polled task still runs.

    Attributes:
        poll_interval_seconds: Seconds before the next poll; rounded up to whole seconds, 1 to a day.
        continuation: Text the next poll reads as ``tool_call.input_continuation``; ``None`` clears it.

    Raises:
        ConfigurationError: When the interval is not a positive number.
    """

    poll_interval_seconds: float
    continuation: str | None = None

    def __post_init__(self) -> None:
        _require_poll_interval(self.poll_interval_seconds, "ToolTaskPending")


def _require_poll_interval(value: object, owner: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigurationError(
            f"{owner}.poll_interval_seconds must be a positive number, got {value!r}"
        )


DeferredToolOutcome: TypeAlias = ToolExecutionResult | ToolInputRequested | ToolTaskStarted
"""Result of ``execute_deferred_tool_call`` for a runner whose tools may ask or start tasks."""
ToolTaskPollOutcome: TypeAlias = ToolExecutionResult | ToolInputRequested | ToolTaskPending
"""Result of ``poll_tool_task``."""

ToolOutcomeT = TypeVar(
    "ToolOutcomeT",
    bound=DeferredToolOutcome,
    covariant=True,
    default=ToolExecutionResult,
)
"""What a runner's ``execute_deferred_tool_call`` returns; a bare runner returns results only."""


@dataclass(frozen=True)
class AgentTurnContext(_Heartbeating):
    """Everything a runner needs for one model call of a turn, inside the ``RunModel`` Step.

    It carries committed state only, so a rerun of the model call sees the same context. Do not
    retain it after ``run_model_step`` returns.

    Attributes:
        flow_id: The session ID.
        turn_id: ``turn-<n>``.
        attempt: One-based ``RunModel`` attempt.
        messages: Every stored message in sequence order (after compaction, only those after
            :attr:`context_summary`); the last user message belongs to this turn.
        framework_run_state: ``None`` for the turn's first model call; otherwise the value from
            this turn's last :class:`ToolCallsRequested`.
        tool_calls: This turn's records by tool call ID, in deferral order; all final.
        events: Writer bound to the turn, Step execution, and attempt.
        step_execution_id: Dex Step execution ID of this ``RunModel``.
        deadline: Absolute deadline of the current attempt, when Dex supplied one.
        enabled_built_in_tools: Built-in tools to offer (``BuiltInTool`` values).
        tool_policies: Explicit policies by tool name, applied first by :meth:`resolve_tool_policy`.
        default_tool_effect: Effect of a tool without a policy or framework metadata.
        interaction_mode: The turn's mode; a plan-mode runner offers only ``write_todos`` while
            ``planning``.
        plan: The plan as committed before this model call, or ``None``.
        context_summary: Summary of the messages before :attr:`messages`, or ``None``.
        session_settings: Settings this turn started with; empty when there are none.
        send_heartbeat: Records a heartbeat; call :meth:`heartbeat` instead.

    Example:
        >>> turn = AgentTurnContext(
        ...     flow_id="session-42", turn_id="turn-1", attempt=1, messages=(),
        ...     framework_run_state=None, tool_calls={}, events=AgentEventWriter.discarding(),
        ... )
        >>> turn.is_resuming, turn.resolve_tool_policy("search").requires_approval
        (False, True)
    """

    flow_id: str
    turn_id: str
    attempt: int
    messages: tuple[AgentMessage, ...]
    framework_run_state: str | None
    tool_calls: Mapping[str, AgentToolCall]
    events: AgentEventWriter
    step_execution_id: str | None = None
    deadline: datetime | None = None
    enabled_built_in_tools: frozenset[str] = frozenset()
    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=dict)
    default_tool_effect: ToolEffect = DEFAULT_TOOL_EFFECT
    interaction_mode: InteractionMode = InteractionMode.CHAT
    plan: AgentPlan | None = None
    context_summary: ContextSummary | None = None
    session_settings: Mapping[str, object] = field(default_factory=dict)
    send_heartbeat: HeartbeatFunction = field(default=_no_heartbeat, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))
        ordered = sorted(self.tool_calls.values(), key=lambda record: record.deferral_order)
        by_id = {record.tool_call_id: record for record in ordered}
        object.__setattr__(self, "tool_calls", MappingProxyType(by_id))
        object.__setattr__(self, "enabled_built_in_tools", frozenset(self.enabled_built_in_tools))

    @property
    def is_resuming(self) -> bool:
        """Whether this model call continues the turn after tool calls (run state is set)."""
        return self.framework_run_state is not None

    def recorded_tool_call(self, tool_call_id: str) -> AgentToolCall | None:
        """Return this turn's record for a tool call ID, or ``None`` if the turn never requested it."""
        return self.tool_calls.get(tool_call_id)

    def resolve_tool_policy(
        self, tool_name: str, framework_effect: ToolEffect | None = None
    ) -> ResolvedToolPolicy:
        """Return the effective policy of a tool: explicit policy, else ``framework_effect``, else
        :attr:`default_tool_effect`. Pass it unchanged in ``DeferredToolCall.policy``.

        Raises:
            ConfigurationError: When ``framework_effect`` is not a known effect.
        """
        return resolve_tool_policy(
            tool_name, self.tool_policies, self.default_tool_effect, framework_effect
        )


@dataclass(frozen=True)
class DeferredToolExecution(_ToolCallStepInput):
    """One tool call that a tool Step asks the runner to run.

    Attributes:
        flow_id: The session ID.
        tool_call: The call's record; its effect selected ``CallTool`` or ``CallSingleAttemptTool``.
        attempt: One-based attempt of the tool Step (up to 3 for read/idempotent_write, else 1).
        events: Writer bound to the turn and attempt.
        deadline: Absolute deadline of the current attempt, when Dex supplied one.
        input_answers: Answers to the questions this call asked, oldest first.
        supports_tool_tasks: Whether the runner polls tasks, so the tool may return
            :class:`ToolTaskStarted`.
        heartbeat_checkpoint: What an earlier attempt saved with :meth:`save_heartbeat_checkpoint`.
        send_heartbeat: Records a heartbeat; call :meth:`heartbeat` instead.
        send_checkpoint: Records a heartbeat carrying a checkpoint; call
            :meth:`save_heartbeat_checkpoint` instead.

    Example:
        >>> call = DeferredToolExecution("session-42", record, 1, AgentEventWriter.discarding())
        >>> call.idempotency_key, call.turn_id
        ('session-42/turn-1/call-1', 'turn-1')
    """

    flow_id: str
    tool_call: AgentToolCall
    attempt: int
    events: AgentEventWriter
    deadline: datetime | None = None
    input_answers: tuple[QuestionAnswer, ...] = ()
    supports_tool_tasks: bool = False
    heartbeat_checkpoint: str | None = None
    send_heartbeat: HeartbeatFunction = field(default=_no_heartbeat, repr=False, compare=False)
    send_checkpoint: Callable[[str], Awaitable[None]] = field(
        default=_no_checkpoint, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "input_answers", tuple(self.input_answers))

    @property
    def turn_id(self) -> str:
        """Turn of the call."""
        return self.tool_call.turn_id

    async def save_heartbeat_checkpoint(self, checkpoint: str) -> None:
        """Record a heartbeat carrying ``checkpoint``; a retried attempt reads it as
        :attr:`heartbeat_checkpoint`. Every later heartbeat of the attempt carries it too.

        Raises:
            RunnerContractError: When ``checkpoint`` is not a string.
        """
        if not isinstance(checkpoint, str):
            raise RunnerContractError(
                f"heartbeat checkpoint must be a string, got {type(checkpoint).__name__}"
            )
        await self.send_checkpoint(checkpoint)


@dataclass(frozen=True)
class ToolTaskPoll(_ToolCallStepInput):
    """One task that ``PollToolTask`` asks the runner to poll.

    Attributes:
        flow_id: The session ID.
        tool_call: The ``waiting_for_task`` record, with ``task_id`` and ``tool_source_reference``.
        attempt: One-based ``PollToolTask`` attempt (up to 3).
        events: Writer bound to the turn and attempt.
        input_answers: How the call's questions were resolved, oldest first.
        pending_answer: The resolution of the task's last question, not delivered yet, or ``None``.
        deadline: Absolute deadline of the current attempt, when Dex supplied one.
        send_heartbeat: Records a heartbeat; call :meth:`heartbeat` instead.
    """

    flow_id: str
    tool_call: AgentToolCallRecord
    attempt: int
    events: AgentEventWriter
    input_answers: tuple[QuestionAnswer, ...] = ()
    pending_answer: QuestionAnswer | None = None
    deadline: datetime | None = None
    send_heartbeat: HeartbeatFunction = field(default=_no_heartbeat, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "input_answers", tuple(self.input_answers))


@dataclass(frozen=True)
class ToolTaskCancellation(_ToolCallStepInput):
    """One task that ``cancel_turn`` abandoned, which ``CancelToolTask`` asks the runner to cancel.

    Attributes:
        flow_id: The session ID.
        tool_call: The record with ``task_id``; its ``cancellation_reason`` is ``turn_cancelled``.
        attempt: One-based ``CancelToolTask`` attempt (up to 3).
        deadline: Absolute deadline of the current attempt, when Dex supplied one.
        send_heartbeat: Records a heartbeat; call :meth:`heartbeat` instead.
    """

    flow_id: str
    tool_call: AgentToolCallRecord
    attempt: int
    deadline: datetime | None = None
    send_heartbeat: HeartbeatFunction = field(default=_no_heartbeat, repr=False, compare=False)


@dataclass(frozen=True)
class ContextSummaryRequest:
    """What ``summarize_context`` folds into a new summary.

    Attributes:
        flow_id: The session ID.
        turn_id: The turn whose model call crossed the threshold.
        attempt: One-based ``CompactContext`` attempt.
        previous_summary: The current summary, or ``None`` for the first compaction.
        messages: The messages to summarize, ascending, through the chosen cutoff.
        input_token_budget: The policy's ``context_window_tokens``; the request must fit it.
        session_settings: The turn's settings, as in ``AgentTurnContext.session_settings``.
        events: Writer bound to the turn and attempt.
    """

    flow_id: str
    turn_id: str
    attempt: int
    previous_summary: ContextSummary | None
    messages: tuple[AgentMessage, ...]
    input_token_budget: int
    session_settings: Mapping[str, object] = field(default_factory=dict)
    events: AgentEventWriter = field(default_factory=AgentEventWriter.discarding)

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))


@dataclass(frozen=True)
class ContextSummaryResult:
    """Result of ``summarize_context``: the new summary text and the usage of its model call."""

    text: str
    usage: AgentUsage
    model_call_metadata: ModelCallMetadata | None = None


@runtime_checkable
class AgentFrameworkRunner(Protocol[ToolOutcomeT]):
    """Framework-specific logic that the shared agent session Flow calls.

    Contract: ``run_model_step`` makes at most one model call and stops before any tool the
    framework can defer; each requested call then runs in its own Step. With
    ``framework_run_state`` set, it restores the framework and gives it every recorded result
    instead of running the tool. Keep no state between calls: a later call may run in another
    Worker. Raising from ``run_model_step`` retries the model call (3 attempts within 30 minutes),
    then fails the turn.

    A bare ``AgentFrameworkRunner`` means ``AgentFrameworkRunner[ToolExecutionResult]``; a runner
    whose tools ask questions or start tasks implements
    ``AgentFrameworkRunner[DeferredToolOutcome]``.

    Example:
        >>> class EchoRunner:
        ...     def build_user_message(self, text: str) -> FrameworkMessage:
        ...         return FrameworkMessage(role=MessageRole.USER, framework_item=text, text=text)
        ...     async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        ...         last = turn.messages[-1].text or ""
        ...         turn.events.write_text_delta(last)
        ...         reply = FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=last, text=last)
        ...         return TurnCompleted(new_messages=(reply,), usage=AgentUsage())
        ...     async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        ...         raise ToolExecutionError("this agent has no tools")
        >>> isinstance(EchoRunner(), AgentFrameworkRunner)
        True
    """

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Convert user text (never blank) into the framework's user message, role ``user``.

        Synchronous, deterministic, and free of side effects.
        """
        ...

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Make the turn's next model call, at most one.

        Returns:
            :class:`TurnCompleted` with every new message of the turn, or
            :class:`ToolCallsRequested` with the run state and every tool call of the response.

        Raises:
            Exception: Any error retries the model call; after the last attempt the turn fails.
        """
        ...

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolOutcomeT:
        """Run the real tool for one tool call, once.

        Raises:
            ToolExecutionError: For a failure the model should see; recorded ``failed``.
            Exception: Any other error is a Step failure, handled by the call's effect.
        """
        ...


@runtime_checkable
class UnfinishedTurnMessageBuilder(Protocol):
    """Optional: messages of a turn that ended without a final answer.

    Implement it when the runner sets ``ToolCallsRequested.new_messages``. ``RecordTurnFailure`` and
    ``ApplyTurnControl`` call it with every record final; return the result of every stored call
    that has no stored result. Synchronous, no model call.
    """

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """Return the messages to append, in order, possibly none."""
        ...


@runtime_checkable
class ToolTaskPoller(Protocol):
    """Optional: polls a remote task a tool started with :class:`ToolTaskStarted`, once per call."""

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Poll the task once; only read it, or deliver ``poll.pending_answer`` idempotently.

        Raises:
            ToolExecutionError: When the task failed in a way the model should see.
        """
        ...


@runtime_checkable
class ToolTaskCanceller(Protocol):
    """Optional: asks the remote system to stop a task that ``cancel_turn`` abandoned."""

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Cancel the task best-effort; idempotent by ``task_id``."""
        ...


@runtime_checkable
class ContextCompactionRunner(Protocol):
    """Optional: the three methods a compaction policy needs."""

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Estimate the input of the next model call, in the policy's token unit."""
        ...

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        """Return the sequence of the last message to summarize, or ``None`` for none.

        Never separate a tool call from its result.
        """
        ...

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Fold the previous summary and the messages into a new summary, one model call at most."""
        ...


@runtime_checkable
class PlanModeRunner(Protocol):
    """Optional: a runner that honors plan mode sets ``supports_plan_mode = True``."""

    @property
    def supports_plan_mode(self) -> bool:
        """Whether the runner offers only ``write_todos`` in a planning turn."""
        ...


def runner_supports_plan_mode(runner: object) -> bool:
    """Return whether ``runner`` declares ``supports_plan_mode`` exactly ``True``.

    Example:
        >>> class Planner:
        ...     supports_plan_mode = True
        >>> runner_supports_plan_mode(Planner()), runner_supports_plan_mode(object())
        (True, False)
    """
    return getattr(runner, "supports_plan_mode", False) is True


def describe_tool_call_outcome(record: AgentToolCall) -> str:
    """Return the model-visible result text of a final tool call record.

    - ``succeeded``: the output.
    - ``failed``: ``Error: <error>``.
    - ``rejected`` by steering or ``cancel_turn``: :data:`STEERED_TOOL_RESULT` or
      :data:`TURN_CANCELLED_TOOL_RESULT`; by the session (``error`` set, such as a declined
      question or a planning turn's other tool): the error verbatim; by a person: ``The user rejected this tool call.``,
      followed by ``Reason: <rejection_message>`` when one was given.
    - ``outcome_unknown``: :data:`OUTCOME_UNKNOWN_TOOL_RESULT`.

    Raises:
        ConfigurationError: When the record is not final yet.

    Example:
        >>> from dex_agents._values import AgentToolCall
        >>> record = AgentToolCall("c1", "search", "{}", ToolEffect.READ, False,
        ...     AgentToolCallStatus.FAILED, "turn-1", 0, error="index offline")
        >>> describe_tool_call_outcome(record)
        'Error: index offline'
    """
    status = record.status
    if status is AgentToolCallStatus.SUCCEEDED:
        return record.output or ""
    if status is AgentToolCallStatus.FAILED:
        return f"Error: {record.error or 'the tool call failed'}"
    if status is AgentToolCallStatus.OUTCOME_UNKNOWN:
        return OUTCOME_UNKNOWN_TOOL_RESULT
    if status is AgentToolCallStatus.REJECTED:
        if record.cancellation_reason is CancellationReason.STEERED:
            return STEERED_TOOL_RESULT
        if record.cancellation_reason is CancellationReason.TURN_CANCELLED:
            return TURN_CANCELLED_TOOL_RESULT
        if record.error:
            # Rejected by the session, not a person: a declined question, a planning turn.
            return record.error
        if record.rejection_message:
            return f"The user rejected this tool call. Reason: {record.rejection_message}"
        return "The user rejected this tool call."
    raise ConfigurationError(
        f"tool call {record.tool_call_id!r} is still {status.value}; only a final record has an outcome"
    )


def build_turn_failure_note(records: Iterable[AgentToolCall]) -> str:
    """Return the note a failed turn leaves, so the next turn's model does not repeat a write.

    One line per record in ``deferral_order``::

        [Dex] The previous turn failed after these tool calls ran:
        - <tool_name> <arguments> -> <status>: <describe_tool_call_outcome(record)>
        Do not repeat these tool calls unless the user asks again.

    Raises:
        ConfigurationError: When ``records`` is empty or a record is not final.

    Example:
        >>> from dex_agents._values import AgentToolCall
        >>> record = AgentToolCall("c1", "refund", '{"order":7}', ToolEffect.NON_IDEMPOTENT_WRITE,
        ...     True, AgentToolCallStatus.SUCCEEDED, "turn-1", 0, output="refunded")
        >>> print(build_turn_failure_note([record]))
        [Dex] The previous turn failed after these tool calls ran:
        - refund {"order":7} -> succeeded: refunded
        Do not repeat these tool calls unless the user asks again.
    """
    ordered = sorted(records, key=lambda record: record.deferral_order)
    if not ordered:
        raise ConfigurationError("a turn failure note needs at least one tool call record")
    return "\n".join(
        [TURN_FAILURE_NOTE_HEADER, *_ran_call_lines(ordered), TURN_FAILURE_NOTE_FOOTER]
    )


def build_turn_cancelled_note(records: Iterable[AgentToolCall] = ()) -> str:
    """Return the note a turn that ``cancel_turn`` stopped ends with.

    :data:`TURN_CANCELLED_NOTE`, then, when tool calls of the turn ran, one line per final
    record in ``deferral_order`` (as in :func:`build_turn_failure_note`) and
    :data:`TURN_FAILURE_NOTE_FOOTER`.

    Raises:
        ConfigurationError: When a record is not final.

    Example:
        >>> print(build_turn_cancelled_note())
        [Dex] The user stopped the previous turn before it finished; its answer was not sent.
    """
    ordered = sorted(records, key=lambda record: record.deferral_order)
    if not ordered:
        return TURN_CANCELLED_NOTE
    header = "These tool calls ran before it stopped:"
    lines = [TURN_CANCELLED_NOTE, header, *_ran_call_lines(ordered), TURN_FAILURE_NOTE_FOOTER]
    return "\n".join(lines)


def _ran_call_lines(ordered: Sequence[AgentToolCall]) -> list[str]:
    """One line per record of a note: the call, its status and its model-visible outcome."""
    return [
        f"- {record.tool_name} {record.arguments} -> {record.status.value}: "
        f"{describe_tool_call_outcome(record)}"
        for record in ordered
    ]


def validate_tool_calls_requested(outcome: ToolCallsRequested, turn: AgentTurnContext) -> None:
    """Check a :class:`ToolCallsRequested` against the contract; the session calls it.

    Raises:
        RunnerContractError: When the run state is empty, there is no tool call, a tool call ID is empty,
            contains ``/``, repeats within the response, or already has a record in this turn; when
            a tool name is empty, arguments are not text, or a policy is not a
            :class:`ResolvedToolPolicy`. The message names the offending call.

    Example:
        >>> outcome = ToolCallsRequested("state", (DeferredToolCall("a/b", "t", "{}",
        ...     ResolvedToolPolicy(ToolEffect.READ, False)),), AgentUsage())
        >>> turn = AgentTurnContext("s", "turn-1", 1, (), None, {}, AgentEventWriter.discarding())
        >>> validate_tool_calls_requested(outcome, turn)
        Traceback (most recent call last):
        ...
        dex_agents.exceptions.RunnerContractError: tool call ID 'a/b' of tool 't' must not contain '/'
    """
    if not isinstance(outcome.framework_run_state, str) or not outcome.framework_run_state:
        raise RunnerContractError(
            "ToolCallsRequested.framework_run_state must be a non-empty string"
        )
    if not outcome.tool_calls:
        raise RunnerContractError("ToolCallsRequested.tool_calls must hold at least one tool call")
    seen: set[str] = set()
    for call in outcome.tool_calls:
        call_id = call.tool_call_id
        if not isinstance(call_id, str) or not call_id:
            raise RunnerContractError(
                f"tool call ID of tool {call.tool_name!r} must be a non-empty string"
            )
        if "/" in call_id:
            raise RunnerContractError(
                f"tool call ID {call_id!r} of tool {call.tool_name!r} must not contain '/'"
            )
        if call_id in seen:
            raise RunnerContractError(f"tool call ID {call_id!r} repeats within one model response")
        if call_id in turn.tool_calls:
            # Named for the user: a model server that numbers calls per response repeats them.
            raise RunnerContractError(
                f"tool call ID {call_id!r} already has a record in {turn.turn_id}; a model server "
                "that numbers tool calls per response (such as 'call_0') repeats IDs within a "
                "turn, and each tool call of a turn needs an ID of its own"
            )
        if not isinstance(call.tool_name, str) or not call.tool_name:
            raise RunnerContractError(f"tool call {call_id!r} needs a non-empty tool name")
        if not isinstance(call.arguments, str):
            raise RunnerContractError(
                f"tool call {call_id!r} must carry its arguments as JSON text"
            )
        if not isinstance(call.policy, ResolvedToolPolicy):
            raise RunnerContractError(
                f"tool call {call_id!r} needs a ResolvedToolPolicy from turn.resolve_tool_policy"
            )
        seen.add(call_id)
