"""Wire values of an agent session: state, messages, tool call records, interrupts, RPC values.

Every value is a frozen dataclass with ``to_json()``/``from_json()`` (plain JSON objects; StrEnums
travel as plain strings; unknown fields are ignored on read, and a missing field takes its
default). The same values are the Dex Attribute, Channel and RPC types of the session Flow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Final

from dex_agents._json_values import WireValue, WireValueError, resolve_wire_value_annotations
from dex_agents._tool_outcome_check import ToolOutcomeCheckStatus
from dex_agents._tool_policy import ToolEffect
from dex_agents.exceptions import ConfigurationError

__all__ = [
    "LIST_AGENT_MESSAGES_MAX_LIMIT",
    "MESSAGE_SEQUENCE_KEY_DIGITS",
    "SNAPSHOT_MESSAGE_LIMIT",
    "AgentInterrupt",
    "AgentInterruptResolution",
    "AgentMessage",
    "AgentMessagesPage",
    "AgentPlan",
    "AgentSessionStartInput",
    "AgentSnapshot",
    "AgentState",
    "AgentStatus",
    "AgentTodo",
    "AgentToolCall",
    "AgentToolCallRecord",
    "AgentToolCallStatus",
    "AgentUsage",
    "AgentUserMessage",
    "AnswerQuestionRequest",
    "CancelTurnRequest",
    "CancellationReason",
    "ContextSummary",
    "DeleteQueuedMessageRequest",
    "ExecutePlanRequest",
    "FrameworkMessage",
    "InteractionMode",
    "InterruptKind",
    "ListAgentMessagesRequest",
    "MessageRole",
    "PlanExecutionRequest",
    "PlanStatus",
    "QuestionAnswer",
    "QuestionResolution",
    "QueuedUserMessage",
    "ResolveInterruptRequest",
    "SessionSettings",
    "SteerUserMessageRequest",
    "TodoStatus",
    "ToolCallCancellation",
    "ToolCallCompleted",
    "TurnCancellationRequest",
    "TurnControlKind",
    "TurnControlRequest",
    "TurnReplySequence",
    "UpdateSessionSettingsRequest",
    "WireValueError",
    "agent_turn_id",
    "empty_agent_usage",
    "message_sequence_key",
    "tool_input_interrupt_id",
]

MESSAGE_SEQUENCE_KEY_DIGITS: Final = 12
"""Digits of :func:`message_sequence_key`, so keys sort like their sequences."""
SNAPSHOT_MESSAGE_LIMIT: Final = 200
"""``AgentSnapshot.messages`` holds at most this many of the newest stored messages."""
LIST_AGENT_MESSAGES_MAX_LIMIT: Final = 200
"""``list_agent_messages`` clamps ``ListAgentMessagesRequest.limit`` to 1..this."""

SessionSettings = Mapping[str, object]
"""One JSON object of session settings, such as ``{"model": "gpt-5-mini"}``."""


def message_sequence_key(sequence: int) -> str:
    """Return the ``AgentMessages`` key of a message sequence: 12 digits, zero-padded.

    Raises:
        ConfigurationError: When ``sequence`` is negative, not an int, or needs more than 12 digits.

    Example:
        >>> message_sequence_key(42)
        '000000000042'
    """
    if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 0:
        raise ConfigurationError(f"message sequence must be a non-negative int, got {sequence!r}")
    key = f"{sequence:0{MESSAGE_SEQUENCE_KEY_DIGITS}d}"
    if len(key) > MESSAGE_SEQUENCE_KEY_DIGITS:
        raise ConfigurationError(f"message sequence {sequence} needs more than 12 digits")
    return key


def agent_turn_id(turn_number: int) -> str:
    """Return the ID of the session's ``turn_number``-th turn, ``turn-<n>``.

    Raises:
        ConfigurationError: When ``turn_number`` is below 1.

    Example:
        >>> agent_turn_id(3)
        'turn-3'
    """
    if not isinstance(turn_number, int) or isinstance(turn_number, bool) or turn_number < 1:
        raise ConfigurationError(f"turn number must be an int from 1, got {turn_number!r}")
    return f"turn-{turn_number}"


def tool_input_interrupt_id(tool_call_id: str, question_number: int) -> str:
    """Return the interrupt ID of a tool's ``question_number``-th question, ``<id>-input-<n>``.

    Raises:
        ConfigurationError: When ``question_number`` is below 1.

    Example:
        >>> tool_input_interrupt_id("call-1", 1)
        'call-1-input-1'
    """
    if question_number < 1:
        raise ConfigurationError(f"question number must be at least 1, got {question_number}")
    return f"{tool_call_id}-input-{question_number}"


class AgentStatus(StrEnum):
    """What the session is doing: ``AgentState.status``."""

    WAITING_FOR_USER_MESSAGE = "waiting_for_user_message"
    RUNNING_MODEL = "running_model"
    RUNNING_TOOLS = "running_tools"
    COMPACTING_CONTEXT = "compacting_context"


class InteractionMode(StrEnum):
    """Kind of the current turn: ordinary chat, writing a plan, or executing an approved plan."""

    CHAT = "chat"
    PLANNING = "planning"
    EXECUTING = "executing"


class MessageRole(StrEnum):
    """Role of a stored message."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


class AgentToolCallStatus(StrEnum):
    """Status of a tool call record; the last four are final.

    Example:
        >>> AgentToolCallStatus.OUTCOME_UNKNOWN.is_final
        True
    """

    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    AWAITING_ANSWER = "awaiting_answer"
    WAITING_FOR_TIMER = "waiting_for_timer"
    WAITING_FOR_TASK = "waiting_for_task"
    REJECTED = "rejected"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"

    @property
    def is_final(self) -> bool:
        """Whether the record will not change again in this turn."""
        return self in _FINAL_TOOL_CALL_STATUSES


_FINAL_TOOL_CALL_STATUSES: Final = frozenset(
    {
        AgentToolCallStatus.REJECTED,
        AgentToolCallStatus.SUCCEEDED,
        AgentToolCallStatus.FAILED,
        AgentToolCallStatus.OUTCOME_UNKNOWN,
    }
)


class CancellationReason(StrEnum):
    """Why steering or ``cancel_turn`` settled a tool call or removed an interrupt."""

    STEERED = "steered"
    TURN_CANCELLED = "turn_cancelled"


class InterruptKind(StrEnum):
    """Kind of a pending interrupt."""

    APPROVAL = "approval"
    QUESTION = "question"


class QuestionResolution(StrEnum):
    """How a question was resolved."""

    ANSWERED = "answered"
    DECLINED = "declined"
    DEADLINE_PASSED = "deadline_passed"


class PlanStatus(StrEnum):
    """Status of the session's plan."""

    DRAFT = "draft"
    ACTIVE = "active"
    COMPLETED = "completed"
    CLEARED = "cleared"


class TodoStatus(StrEnum):
    """Status of one task of a plan."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class TurnControlKind(StrEnum):
    """What a ``TurnControlRequest`` asks of the running turn."""

    STEER = "steer"
    CANCEL = "cancel"


@dataclass(frozen=True)
class AgentUsage(WireValue):
    """Token usage of one model call, or the session total.

    ``model_calls`` defaults to 1, so a runner reports one model call's usage without setting it;
    :func:`empty_agent_usage` is the zero total. Add usages with ``+``.

    Example:
        >>> total = empty_agent_usage() + AgentUsage(input_tokens=10, output_tokens=3)
        >>> (total.input_tokens, total.model_calls)
        (10, 1)
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    model_calls: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in (
            "input_tokens",
            "output_tokens",
            "cached_input_tokens",
            "reasoning_tokens",
            "model_calls",
        ):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"AgentUsage.{name} must not be negative")

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: AgentUsage) -> AgentUsage:
        if not isinstance(other, AgentUsage):
            return NotImplemented
        return AgentUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            model_calls=self.model_calls + other.model_calls,
        )


def empty_agent_usage() -> AgentUsage:
    """Return usage of nothing: every count zero, including ``model_calls``.

    Example:
        >>> empty_agent_usage().model_calls
        0
    """
    return AgentUsage(model_calls=0)


@dataclass(frozen=True)
class FrameworkMessage(WireValue):
    """One message as a runner hands it to the session for storage.

    ``framework_item`` is the framework's own serialized item, replayed to the framework unchanged;
    the other fields are provider-neutral projections for UIs, tracing and notes.

    Example:
        >>> FrameworkMessage(role=MessageRole.USER, framework_item='{"content":"hi"}', text="hi").role
        <MessageRole.USER: 'user'>
    """

    role: MessageRole
    framework_item: str
    text: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_arguments: str | None = None
    tool_output: str | None = None


@dataclass(frozen=True)
class AgentMessage(WireValue):
    """One stored session message, the ``AgentMessages`` value.

    Attributes:
        sequence: Position in the session, from 1.
        role: Message role.
        framework_item: The runner's serialized item, replayed unchanged.
        text: Visible text, when the message has any.
        tool_call_id, tool_name, tool_arguments, tool_output: Tool request/result projections.
        turn_id: Turn that stored the message, ``turn-<n>``.
        created_at: When the session stored it (Worker clock).
        outcome_check: On a tool result, its call's ``AgentToolCall.outcome_check`` once the call's
            attempt was lost and its outcome check answered; ``None`` otherwise. The record is
            deleted when the turn ends, so this is what a page reads after the turn.
    """

    sequence: int
    role: MessageRole
    framework_item: str
    text: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_arguments: str | None = None
    tool_output: str | None = None
    turn_id: str | None = None
    created_at: datetime | None = None
    outcome_check: ToolOutcomeCheckStatus | None = None

    @classmethod
    def from_framework_message(
        cls,
        message: FrameworkMessage,
        *,
        sequence: int,
        turn_id: str | None,
        created_at: datetime | None,
        outcome_check: ToolOutcomeCheckStatus | None = None,
    ) -> AgentMessage:
        """Return ``message`` stored at ``sequence``.

        Example:
            >>> item = FrameworkMessage(role=MessageRole.USER, framework_item="{}", text="hi")
            >>> AgentMessage.from_framework_message(item, sequence=1, turn_id="turn-1", created_at=None).text
            'hi'
        """
        return cls(
            sequence=sequence,
            role=message.role,
            framework_item=message.framework_item,
            text=message.text,
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
            tool_arguments=message.tool_arguments,
            tool_output=message.tool_output,
            turn_id=turn_id,
            created_at=created_at,
            outcome_check=outcome_check,
        )

    def to_framework_message(self) -> FrameworkMessage:
        """Return this message without its storage fields."""
        return FrameworkMessage(
            role=self.role,
            framework_item=self.framework_item,
            text=self.text,
            tool_call_id=self.tool_call_id,
            tool_name=self.tool_name,
            tool_arguments=self.tool_arguments,
            tool_output=self.tool_output,
        )


@dataclass(frozen=True)
class QuestionAnswer(WireValue):
    """How one question of a tool call was resolved.

    Attributes:
        interrupt_id: The question's interrupt ID, ``<tool_call_id>-input-<n>`` for a tool's question.
        question: The question text.
        resolution: Answered, declined, or past its deadline.
        answer: The answer text when ``resolution`` is ``answered``.
    """

    interrupt_id: str
    question: str
    resolution: QuestionResolution
    answer: str | None = None


@dataclass(frozen=True)
class AgentToolCall(WireValue):
    """One tool call record of the active turn, the ``AgentToolCalls`` value keyed by its ID.

    Records are deleted when the turn ends. Runners see only final records (``poll_tool_task`` sees
    a ``waiting_for_task`` one).

    Attributes:
        tool_call_id: Framework tool call ID, unique within the turn.
        tool_name: Tool name as the model called it.
        arguments: Tool arguments as JSON text.
        effect: Effective effect; it selected the tool Step.
        requires_approval: Whether the call waited for ``AwaitToolApproval``.
        status: Current status.
        turn_id: Turn that requested the call.
        deferral_order: Zero-based position in the turn's model order of tool calls.
        output: Output text of a ``succeeded`` call.
        error: Error text of a ``failed`` or ``outcome_unknown`` call.
        rejection_message: Reason a person gave when rejecting the call.
        cancellation_reason: ``steered`` or ``turn_cancelled`` when steering or cancellation settled it.
        tool_source_reference: Opaque text from ``DeferredToolCall.tool_source_reference``.
        trace_context: W3C traceparent that parents the call's spans.
        question, choices, allows_free_text: The tool's pending question, when it asked one.
        question_count: How many questions the call has asked.
        input_continuation: Opaque continuation of the last question or task poll.
        input_answers: Resolutions of the call's questions, oldest first.
        task_id, task_poll_interval_seconds, task_answer_pending: Remote task of the call.
        wait_until, wait_reason: A ``durable_wait`` call's Timer.
        created_at: When ``RunModel`` recorded the call.
        outcome_check: Set once the call's attempt was lost and its tool declares an outcome
            check: ``pending`` while ``CheckToolOutcome`` asks, then the check's answer
            (``applied``, ``not_applied``, ``unknown``, or ``check_failed``); ``None`` otherwise.
        run_again_count: How many times the call ran again after its check answered
            ``not_applied`` (0 or 1).
    """

    tool_call_id: str
    tool_name: str
    arguments: str
    effect: ToolEffect
    requires_approval: bool
    status: AgentToolCallStatus
    turn_id: str
    deferral_order: int
    output: str | None = None
    error: str | None = None
    rejection_message: str | None = None
    cancellation_reason: CancellationReason | None = None
    tool_source_reference: str | None = None
    trace_context: str | None = None
    question: str | None = None
    choices: tuple[str, ...] = ()
    allows_free_text: bool = True
    question_count: int = 0
    input_continuation: str | None = None
    input_answers: tuple[QuestionAnswer, ...] = ()
    task_id: str | None = None
    task_poll_interval_seconds: int | None = None
    task_answer_pending: bool = False
    wait_until: datetime | None = None
    wait_reason: str | None = None
    created_at: datetime | None = None
    outcome_check: ToolOutcomeCheckStatus | None = None
    run_again_count: int = 0

    @property
    def is_final(self) -> bool:
        """Whether the status is final: rejected, succeeded, failed, or outcome_unknown."""
        return self.status.is_final


AgentToolCallRecord = AgentToolCall
"""The stored form of a tool call; the same type as :class:`AgentToolCall`."""


@dataclass(frozen=True)
class AgentInterrupt(WireValue):
    """One pending approval or question, an item of ``PendingInterrupts``.

    Attributes:
        interrupt_id: The tool call ID for an approval or ``ask_user`` question;
            ``<tool_call_id>-input-<n>`` for a tool's question.
        tool_call_id: The call that waits.
        tool_name: The call's tool.
        kind: ``approval`` or ``question``.
        turn_id: Turn of the call.
        arguments: The call's arguments as JSON text, for an approval UI.
        deadline: When the interrupt expires, or ``None`` for never.
        question, choices, allows_free_text: The question, for kind ``question``.
        created_at: When the interrupt was raised.
    """

    interrupt_id: str
    tool_call_id: str
    tool_name: str
    kind: InterruptKind
    turn_id: str | None = None
    arguments: str | None = None
    deadline: datetime | None = None
    question: str | None = None
    choices: tuple[str, ...] = ()
    allows_free_text: bool = True
    created_at: datetime | None = None


@dataclass(frozen=True)
class AgentInterruptResolution(WireValue):
    """Answer to one interrupt, published on ``InterruptResolutions`` under its ID.

    Attributes:
        interrupt_id: The interrupt it resolves.
        approved: Approval decision; ``False`` on a question declines it.
        rejection_message: Reason for a rejection; dropped on approval.
        answer: The answer to a question.
        cancellation_reason: Set when steering or cancellation removed the interrupt.
    """

    interrupt_id: str
    approved: bool
    rejection_message: str | None = None
    answer: str | None = None
    cancellation_reason: CancellationReason | None = None


@dataclass(frozen=True)
class AgentUserMessage(WireValue):
    """A user message, the ``send_user_message`` input and the queued/steered Channel value.

    Attributes:
        text: Message text; blank text is refused.
        plan_mode: Start a planning turn (needs plan mode).
    """

    text: str
    plan_mode: bool = False


@dataclass(frozen=True)
class QueuedUserMessage(WireValue):
    """A queued or steered message as ``AgentSnapshot`` lists it, with its Channel message ID."""

    message_id: str
    text: str
    plan_mode: bool = False


@dataclass(frozen=True)
class ToolCallCompleted(WireValue):
    """Internal ``ToolCallResults`` message: one tool call's record became final."""

    tool_call_id: str


@dataclass(frozen=True)
class AgentSessionStartInput(WireValue):
    """Input of ``StartAgentSession``.

    Attributes:
        initial_message: First user message; blank starts no turn.
        session_settings: The session's initial ``SessionSettings`` JSON object.
        plan_mode: Start the first turn as a planning turn.
    """

    initial_message: str = ""
    session_settings: Mapping[str, object] = field(default_factory=dict)
    plan_mode: bool = False


@dataclass(frozen=True)
class ResolveInterruptRequest(WireValue):
    """Input of ``resolve_interrupt``: approve or reject an approval, or decline a question."""

    interrupt_id: str
    approved: bool
    rejection_message: str | None = None


@dataclass(frozen=True)
class AnswerQuestionRequest(WireValue):
    """Input of ``answer_question``."""

    interrupt_id: str
    answer: str


@dataclass(frozen=True)
class SteerUserMessageRequest(WireValue):
    """Input of ``steer_user_message``: exactly one of ``text`` and ``message_id``."""

    text: str | None = None
    message_id: str | None = None
    plan_mode: bool = False


@dataclass(frozen=True)
class DeleteQueuedMessageRequest(WireValue):
    """Input of ``delete_queued_message``."""

    message_id: str


@dataclass(frozen=True)
class CancelTurnRequest(WireValue):
    """Input of ``cancel_turn``: the turn to stop; another turn makes it return ``False``."""

    turn_id: str


@dataclass(frozen=True)
class ExecutePlanRequest(WireValue):
    """Input of ``execute_plan``: the plan revision the user approved."""

    revision: int


@dataclass(frozen=True)
class UpdateSessionSettingsRequest(WireValue):
    """Input of ``update_session_settings``: the new settings, replacing the old ones."""

    session_settings: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class ListAgentMessagesRequest(WireValue):
    """Input of ``list_agent_messages``.

    Attributes:
        after_sequence: Return messages after this sequence, oldest first; ``None`` starts at the
            oldest stored message.
        limit: Page size, clamped to 1..200.
    """

    after_sequence: int | None = None
    limit: int = 50


@dataclass(frozen=True)
class AgentMessagesPage(WireValue):
    """Output of ``list_agent_messages``.

    Attributes:
        messages: Messages in ascending sequence order.
        next_after_sequence: Pass it as ``after_sequence`` for the next page; ``None`` on the last.
        deleted_before_sequence: Set once retention deleted messages: every sequence before it is gone.
    """

    messages: tuple[AgentMessage, ...] = ()
    next_after_sequence: int | None = None
    deleted_before_sequence: int | None = None


@dataclass(frozen=True)
class AgentState(WireValue):
    """The ``AgentState`` Attribute.

    Attributes:
        status: What the session is doing.
        interaction_mode: Kind of the current (or last) turn.
        active_turn_id: The running turn, or ``None`` while waiting for a user message.
        turn_count: Turns started so far; the active turn is ``turn-<turn_count>``.
        last_message_sequence: Sequence of the newest stored message, 0 before any.
        last_turn_error: Why the last failed turn failed; cleared when a later turn completes.
        accepts_turn_control: Whether the active turn can be steered or cancelled.
    """

    status: AgentStatus = AgentStatus.WAITING_FOR_USER_MESSAGE
    interaction_mode: InteractionMode = InteractionMode.CHAT
    active_turn_id: str | None = None
    turn_count: int = 0
    last_message_sequence: int = 0
    last_turn_error: str | None = None
    accepts_turn_control: bool = True


@dataclass(frozen=True)
class AgentTodo(WireValue):
    """One task of a plan."""

    content: str
    status: TodoStatus = TodoStatus.PENDING


@dataclass(frozen=True)
class AgentPlan(WireValue):
    """The ``AgentPlan`` Attribute, replaced as a whole by each successful ``write_todos``."""

    revision: int
    status: PlanStatus
    todos: tuple[AgentTodo, ...] = ()
    updated_at: datetime | None = None


@dataclass(frozen=True)
class PlanExecutionRequest(WireValue):
    """An approval of one plan revision, on ``PlanExecutions`` and in ``PendingPlanExecution``."""

    revision: int


@dataclass(frozen=True)
class ContextSummary(WireValue):
    """The ``ContextSummary`` Attribute: a summary of messages ``first_sequence..last_sequence``."""

    generation: int
    first_sequence: int
    last_sequence: int
    text: str
    created_at: datetime | None = None


@dataclass(frozen=True)
class TurnReplySequence(WireValue):
    """Where the latest turn's replies start."""

    turn_id: str
    sequence: int


@dataclass(frozen=True)
class TurnControlRequest(WireValue):
    """Internal ``TurnControlRequests`` wake: steer or cancel the active turn."""

    kind: TurnControlKind
    turn_id: str | None = None


@dataclass(frozen=True)
class TurnCancellationRequest(WireValue):
    """The ``TurnCancellationRequest`` Attribute, written only by ``cancel_turn``."""

    turn_id: str
    requested_at: datetime | None = None


@dataclass(frozen=True)
class ToolCallCancellation(WireValue):
    """Internal ``ToolCallCancellations`` wake of one waiting tool call."""

    tool_call_id: str
    reason: CancellationReason


@dataclass(frozen=True)
class AgentSnapshot(WireValue):
    """Output of ``get_agent_snapshot``.

    Attributes:
        state: Session state, ``None`` until ``StartAgentSession`` commits.
        messages: The newest stored messages, at most 200, ascending.
        pending_interrupts: Approvals and questions waiting for a person.
        tool_calls: Records of the active turn, in deferral order.
        usage: Cumulative usage of the session.
        queued_message_count: User messages queued behind the active turn.
        plan: The plan, or ``None`` before ``write_todos`` first succeeded.
        queued_messages: Queued messages with their Channel message IDs.
        steered_messages: Steered messages not applied yet.
        session_settings: Settings the next turn starts with.
        context_summary: The latest context summary, once the session compacted.
        deleted_before_sequence: Set once retention deleted messages before this sequence.
    """

    state: AgentState | None = None
    messages: tuple[AgentMessage, ...] = ()
    pending_interrupts: tuple[AgentInterrupt, ...] = ()
    tool_calls: tuple[AgentToolCall, ...] = ()
    usage: AgentUsage = field(default_factory=empty_agent_usage)
    queued_message_count: int = 0
    plan: AgentPlan | None = None
    queued_messages: tuple[QueuedUserMessage, ...] = ()
    steered_messages: tuple[QueuedUserMessage, ...] = ()
    session_settings: Mapping[str, object] = field(default_factory=dict)
    context_summary: ContextSummary | None = None
    deleted_before_sequence: int | None = None


resolve_wire_value_annotations(__name__)
