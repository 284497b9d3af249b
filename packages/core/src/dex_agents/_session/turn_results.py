"""What a turn-level client call returns: ``TurnResult``, and how it is read off ``AgentEvents``.

``AgentSessionClient.run_turn`` and ``wait_for_turn`` follow the session's event Stream from a
resume token and stop at the turn's end or at its first pending approval or question. The
:class:`TurnTracker` here is the pure part of that: it is fed the events one by one, and builds
the result from the events and one final read: the turn's own stored messages for a turn whose
end event says where its messages end, else the snapshot. The async and the synchronous client
both drive it, so the two never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from dex_agents._events import AgentEvent, AgentEventType
from dex_agents._tool_outcome_check import ToolOutcomeCheckStatus
from dex_agents._tool_policy import ToolEffect
from dex_agents._values import (
    AgentInterrupt,
    AgentMessage,
    AgentSnapshot,
    AgentToolCall,
    AgentToolCallStatus,
    MessageRole,
)
from dex_agents.exceptions import DexAgentsError

__all__ = [
    "DEFAULT_TURN_TIMEOUT_SECONDS",
    "STREAM_POLL_SECONDS",
    "TurnResult",
    "TurnStatus",
    "TurnTimeoutError",
    "TurnToolCall",
    "TurnTracker",
]

DEFAULT_TURN_TIMEOUT_SECONDS: Final = 300.0
"""How long ``run_turn`` and ``wait_for_turn`` wait by default."""

STREAM_POLL_SECONDS: Final = 10.0
"""The longest single ``read_stream`` long poll; after one that saw nothing, the snapshot is read
once, because Streams are best effort and the snapshot is the truth."""


class TurnStatus(StrEnum):
    """How a turn-level call saw the turn end, or why it stopped waiting."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STEERED = "steered"
    WAITING_FOR_PERSON = "waiting_for_person"
    """The turn waits for an approval or an answer (``TurnResult.pending_interrupts``)."""


@dataclass(frozen=True)
class TurnToolCall:
    """One tool call of the turn, as the turn-level call saw it.

    Attributes:
        tool_call_id: The call's ID.
        tool_name: The tool the model called.
        status: Its final status, or where it stands while the turn waits for a person.
        effect: The effect class the session's policy gave it.
        requires_approval: Whether it needs (or needed) a person's approval.
        output: The tool result the model sees, when the session stores it.
        outcome_check: The answer of the call's outcome check (``applied``, ``not_applied``,
            ``unknown``, ``check_failed``) when its attempt was lost and the check ran, else
            ``None``.
    """

    tool_call_id: str
    tool_name: str
    status: AgentToolCallStatus
    effect: ToolEffect | None = None
    requires_approval: bool = False
    output: str | None = None
    outcome_check: ToolOutcomeCheckStatus | None = None


@dataclass(frozen=True)
class TurnResult:
    """What a turn-level call returns: how the turn ended, or that it waits for a person.

    Attributes:
        session_id: The session.
        turn_id: The turn, ``turn-<n>``.
        status: Completed, failed, cancelled, steered, or waiting for a person.
        text: The turn's last assistant text, or ``None`` when it has none.
        tool_calls: The turn's tool calls in the order the model asked for them.
        pending_interrupts: The approvals and questions that wait (only while the status is
            ``WAITING_FOR_PERSON``).
        error: The turn's error when it failed (``AgentState.last_turn_error``).
        resume_token: The ``AgentEvents`` token after the last event read; pass this result to
            ``wait_for_turn`` to keep following the turn after answering.

    Example:
        >>> result = TurnResult("s1", "turn-1", TurnStatus.COMPLETED, "Done", (), (), None, "")
        >>> result.completed
        True
    """

    session_id: str
    turn_id: str
    status: TurnStatus
    text: str | None
    tool_calls: tuple[TurnToolCall, ...]
    pending_interrupts: tuple[AgentInterrupt, ...]
    error: str | None
    resume_token: str

    @property
    def completed(self) -> bool:
        """Whether the turn completed."""
        return self.status is TurnStatus.COMPLETED


class TurnTimeoutError(DexAgentsError, TimeoutError):
    """The turn neither ended nor stopped for a person within the timeout.

    Nothing is lost: the turn runs on. Wait again with ``wait_for_turn(session_id,
    error.resume_token, turn_id=error.turn_id)``.

    Attributes:
        session_id: The session.
        turn_id: The turn, or ``None`` when it had not started.
        resume_token: The ``AgentEvents`` token after the last event read.
    """

    def __init__(
        self, session_id: str, turn_id: str | None, resume_token: str, timeout: float
    ) -> None:
        what = f"turn {turn_id}" if turn_id is not None else "the turn"
        super().__init__(
            f"{what} of session {session_id} did not end or stop for a person within "
            f"{timeout:g} s; it keeps running"
        )
        self.session_id = session_id
        self.turn_id = turn_id
        self.resume_token = resume_token


_END_STATUSES: Final = {
    AgentEventType.TURN_COMPLETED: TurnStatus.COMPLETED,
    AgentEventType.TURN_FAILED: TurnStatus.FAILED,
    AgentEventType.TURN_CANCELLED: TurnStatus.CANCELLED,
    AgentEventType.TURN_STEERED: TurnStatus.STEERED,
}


@dataclass
class _CallSeen:
    tool_name: str
    status: AgentToolCallStatus
    effect: ToolEffect | None = None
    requires_approval: bool = False
    outcome_check: ToolOutcomeCheckStatus | None = None


@dataclass
class TurnTracker:
    """Follows one turn's events; the driver reads a snapshot when ``needs_snapshot`` says so.

    ``wait_for_start`` ignores everything before the next ``turn_started`` (a message sent while
    another turn runs starts the turn after it); otherwise the first event of any turn names it.
    ``start_sequence`` is the turn's first message (from ``turn_started``) and ``end_sequence``
    the session's newest message once the turn ended (the ``message_count`` of
    ``turn_completed``, ``turn_cancelled`` and ``turn_steered``), when those events were read.
    """

    session_id: str
    turn_id: str | None = None
    wait_for_start: bool = False
    status: TurnStatus | None = None
    error: str | None = None
    calls: dict[str, _CallSeen] = field(default_factory=dict)
    start_sequence: int | None = None
    end_sequence: int | None = None

    @classmethod
    def continuing(cls, result: TurnResult) -> TurnTracker:
        """A tracker that keeps following ``result``'s turn with the calls it already saw."""
        tracker = cls(result.session_id, result.turn_id)
        for call in result.tool_calls:
            tracker.calls[call.tool_call_id] = _CallSeen(
                call.tool_name, call.status, call.effect, call.requires_approval
            )
        return tracker

    @property
    def done(self) -> bool:
        return self.status is not None

    def observe(self, event: AgentEvent) -> bool:
        """Take one event; ``True`` when the driver should check the snapshot for a person's wait."""
        if event.turn_id is None:
            return False
        if self.turn_id is None:
            if self.wait_for_start and event.type != AgentEventType.TURN_STARTED:
                return False
            self.turn_id = event.turn_id
        if event.turn_id != self.turn_id:
            return False
        end = _END_STATUSES.get(AgentEventType(event.type)) if _is_standard(event) else None
        if end is not None:
            self.status = end
            payload = event.payload_json()
            if end is TurnStatus.FAILED:
                self.error = str(payload.get("error", "")) or None
            else:
                self.end_sequence = _sequence(payload.get("message_count"))
            return False
        payload = event.payload_json() if _is_standard(event) else {}
        if event.type == AgentEventType.TURN_STARTED:
            self.start_sequence = _sequence(payload.get("sequence"))
        call_id = str(payload.get("tool_call_id", ""))
        if event.type == AgentEventType.TOOL_CALL_DEFERRED:
            requires_approval = bool(payload.get("requires_approval"))
            self.calls[call_id] = _CallSeen(
                tool_name=str(payload.get("tool_name", "")),
                status=(
                    AgentToolCallStatus.AWAITING_APPROVAL
                    if requires_approval
                    else AgentToolCallStatus.APPROVED
                ),
                effect=_effect(payload.get("effect")),
                requires_approval=requires_approval,
            )
        elif event.type == AgentEventType.TOOL_CALL_FINISHED:
            seen = self.calls.setdefault(
                call_id, _CallSeen(str(payload.get("tool_name", "")), AgentToolCallStatus.APPROVED)
            )
            seen.status = AgentToolCallStatus(str(payload.get("status")))
            check = payload.get("outcome_check")
            seen.outcome_check = ToolOutcomeCheckStatus(str(check)) if check else None
        elif event.type == AgentEventType.TOOL_CALL_STARTED:
            self.calls.setdefault(
                call_id, _CallSeen(str(payload.get("tool_name", "")), AgentToolCallStatus.APPROVED)
            )
        return event.type == AgentEventType.INTERRUPT_RAISED

    def check_waiting(self, snapshot: AgentSnapshot) -> None:
        """Settle on ``WAITING_FOR_PERSON`` when the snapshot shows the turn's interrupt pending."""
        if self.turn_id is not None and not self.done and self._pending(snapshot):
            self.status = TurnStatus.WAITING_FOR_PERSON

    def check_ended(self, snapshot: AgentSnapshot) -> None:
        """Settle the status from the snapshot: a person's wait, or an end the Stream dropped."""
        self.check_waiting(snapshot)
        if self.turn_id is None or self.done:
            return
        state = snapshot.state
        if state is None or state.active_turn_id == self.turn_id:
            return
        # The turn is over but its end event was not read (Streams are best effort).
        self.error = state.last_turn_error
        self.status = TurnStatus.FAILED if state.last_turn_error else TurnStatus.COMPLETED

    def result(self, snapshot: AgentSnapshot, resume_token: str) -> TurnResult:
        """The result, from what the events said and the snapshot read after them."""
        waiting = self.status is TurnStatus.WAITING_FOR_PERSON
        return self._result(
            snapshot.messages,
            snapshot.tool_calls,
            self._pending(snapshot) if waiting else (),
            resume_token,
        )

    def result_of_messages(self, messages: Sequence[AgentMessage], resume_token: str) -> TurnResult:
        """The result of an ended turn, from what the events said and its stored messages.

        A committed end leaves no record of the turn (a snapshot's ``tool_calls`` hold the active
        turn's only) and no pending interrupt, so the turn's messages are all a snapshot adds.
        """
        return self._result(messages, (), (), resume_token)

    def _result(
        self,
        messages: Sequence[AgentMessage],
        tool_calls: Sequence[AgentToolCall],
        pending: tuple[AgentInterrupt, ...],
        resume_token: str,
    ) -> TurnResult:
        assert self.turn_id is not None and self.status is not None
        turn_messages = [m for m in messages if m.turn_id == self.turn_id]
        outputs = {
            m.tool_call_id: m.tool_output
            for m in turn_messages
            if m.role == MessageRole.TOOL and m.tool_call_id is not None
        }
        records = {r.tool_call_id: r for r in tool_calls if r.turn_id == self.turn_id}
        for call_id, record in records.items():
            self.calls[call_id] = _CallSeen(
                record.tool_name, record.status, record.effect, record.requires_approval
            )
        texts = [m.text for m in turn_messages if m.role == MessageRole.ASSISTANT and m.text]
        return TurnResult(
            session_id=self.session_id,
            turn_id=self.turn_id,
            status=self.status,
            text=texts[-1] if texts else None,
            tool_calls=tuple(
                TurnToolCall(
                    call_id,
                    seen.tool_name,
                    seen.status,
                    seen.effect,
                    seen.requires_approval,
                    outputs.get(call_id),
                    seen.outcome_check,
                )
                for call_id, seen in self.calls.items()
            ),
            pending_interrupts=pending,
            error=self.error,
            resume_token=resume_token,
        )

    def _pending(self, snapshot: AgentSnapshot) -> tuple[AgentInterrupt, ...]:
        active = snapshot.state.active_turn_id if snapshot.state is not None else None
        return tuple(
            interrupt
            for interrupt in snapshot.pending_interrupts
            if (interrupt.turn_id or active) == self.turn_id
        )


_STANDARD_TYPES: Final = frozenset(item.value for item in AgentEventType)


def _is_standard(event: AgentEvent) -> bool:
    return event.type in _STANDARD_TYPES


def _sequence(value: object) -> int | None:
    # A payload from another writer may lack the field or hold something else: then unknown.
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _effect(value: object) -> ToolEffect | None:
    try:
        return ToolEffect(str(value))
    except ValueError:
        return None
