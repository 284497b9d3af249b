"""``TurnContextBuilder``: a runner's ``AgentTurnContext``, built the way a session builds it,
for calling the runner's methods directly in a test (no engine, no Worker)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dex_agents._event_writer import AgentEventWriter
from dex_agents._events import AgentEvent
from dex_agents._runner_contract import AgentTurnContext
from dex_agents._values import AgentMessage, AgentToolCall, FrameworkMessage


@dataclass
class TurnContextBuilder:
    """Stores messages as a session does and hands out the turn's ``AgentTurnContext``.

    For a runner's unit tests: :meth:`start_turn` begins a turn with the user's message,
    :meth:`store` adds what the runner answered (numbered in order, in the current turn), and
    :meth:`context` is what ``RunModel`` would pass next. Every event the runner writes lands in
    :attr:`events`.

    Attributes:
        flow_id: The session ID the contexts carry.
        step_execution_id: The ``RunModel`` Step execution ID of the contexts and their events.
        turn_number: The current turn is ``turn-<turn_number>``.
        messages: Every stored message, oldest first.
        events: Every event written through a context's ``events``.

    Example:
        >>> from dex_agents import FrameworkMessage, MessageRole
        >>> builder = TurnContextBuilder()
        >>> builder.start_turn(FrameworkMessage(MessageRole.USER, "hi", text="hi"))
        >>> builder.store([FrameworkMessage(MessageRole.ASSISTANT, "hello", text="hello")])
        >>> builder.start_turn(FrameworkMessage(MessageRole.USER, "again", text="again"))
        >>> context = builder.context()
        >>> context.turn_id, [(m.sequence, m.turn_id) for m in context.messages]
        ('turn-2', [(1, 'turn-1'), (2, 'turn-1'), (3, 'turn-2')])
    """

    flow_id: str = "session-1"
    step_execution_id: str | None = "RunModel-1"
    turn_number: int = 1
    messages: list[AgentMessage] = field(default_factory=list)
    events: list[AgentEvent] = field(default_factory=list)

    @property
    def turn_id(self) -> str:
        """``turn-<turn_number>``."""
        return f"turn-{self.turn_number}"

    def start_turn(self, user_message: FrameworkMessage) -> None:
        """Store ``user_message`` as the start of the next turn (the first while none is stored)."""
        if any(message.turn_id == self.turn_id for message in self.messages):
            self.turn_number += 1
        self.store([user_message])

    def store(self, new_messages: Sequence[FrameworkMessage]) -> None:
        """Store ``new_messages`` in the current turn, numbered after the stored ones."""
        for message in new_messages:
            self.messages.append(
                AgentMessage.from_framework_message(
                    message,
                    sequence=len(self.messages) + 1,
                    turn_id=self.turn_id,
                    created_at=None,
                )
            )

    def context(
        self,
        *,
        run_state: str | None = None,
        records: Iterable[AgentToolCall] = (),
        attempt: int = 1,
        **fields: Any,
    ) -> AgentTurnContext:
        """The current turn's context with every stored message.

        ``run_state`` is the turn's framework run state (``None`` for its first model call),
        ``records`` its final tool call records; ``fields`` are any other ``AgentTurnContext``
        fields (``tool_policies``, ``interaction_mode``...).
        """
        events = AgentEventWriter(
            self.events.append,
            turn_id=self.turn_id,
            step_execution_id=self.step_execution_id,
            attempt=attempt,
        )
        return AgentTurnContext(
            flow_id=self.flow_id,
            turn_id=self.turn_id,
            attempt=attempt,
            messages=tuple(self.messages),
            framework_run_state=run_state,
            tool_calls={record.tool_call_id: record for record in records},
            events=events,
            step_execution_id=self.step_execution_id,
            **fields,
        )
