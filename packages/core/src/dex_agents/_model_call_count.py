"""A framework run state that holds only the turn's model call count.

A runner that stores every message of the turn as it appears (``ToolCallsRequested.new_messages``)
needs nothing else between two model calls of one turn: the stored messages and the calls' final
records rebuild the framework's input. Such runners (Stepwise, Google ADK, Claude Agent SDK) keep
the count in one shape, under their own key, so one runner never reads another's run state.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from dex_agents._json_values import dump_json_text
from dex_agents._runner_contract import (
    AgentTurnOutcome,
    DeferredToolCall,
    ModelCallMetadata,
    ToolCallsRequested,
    TurnCompleted,
)
from dex_agents._values import AgentUsage, FrameworkMessage
from dex_agents.exceptions import StoredStateError

__all__ = ["ModelCallCountState"]

_QUOTED_CHARACTERS = 80
"""How much of a foreign run state an error quotes."""


@dataclass(frozen=True)
class ModelCallCountState:
    """The codec of a run state that counts the turn's model calls so far.

    Attributes:
        key: The JSON key the count is stored under; each runner has its own.
        runner_name: The runner named in the error for a run state it did not write.

    Example:
        >>> state = ModelCallCountState("echo_model_calls", "EchoRunner")
        >>> state.encode(2)
        '{"echo_model_calls":2}'
        >>> state.decode('{"echo_model_calls":2}'), state.decode(None)
        (2, 0)
    """

    key: str
    runner_name: str

    def encode(self, model_calls: int) -> str:
        """The run state of a turn that made ``model_calls`` model calls so far."""
        return dump_json_text({self.key: model_calls})

    def decode(self, run_state: str | None) -> int:
        """The turn's model call count so far: 0 before its first model call (no run state).

        Raises:
            StoredStateError: When ``run_state`` is not one that :meth:`encode` wrote (a positive
                count under this runner's key).

        Example:
            >>> ModelCallCountState("echo_model_calls", "EchoRunner").decode('{"other":1}')
            Traceback (most recent call last):
            ...
            dex_agents.exceptions.StoredStateError: framework run state '{"other":1}' is not a EchoRunner run state
        """
        if run_state is None:
            return 0
        try:
            decoded = json.loads(run_state)
        except ValueError:
            decoded = None
        count = decoded.get(self.key) if isinstance(decoded, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise StoredStateError(
                f"framework run state {run_state[:_QUOTED_CHARACTERS]!r} is not a "
                f"{self.runner_name} run state"
            )
        return count

    def outcome(
        self,
        model_calls: int,
        *,
        tool_calls: Sequence[DeferredToolCall],
        new_messages: Sequence[FrameworkMessage],
        usage: AgentUsage,
        model_call_metadata: ModelCallMetadata | None = None,
    ) -> AgentTurnOutcome:
        """The outcome of the turn's model call number ``model_calls``: ``TurnCompleted``
        without tool calls, else ``ToolCallsRequested`` with the run state of that count.

        Example:
            >>> state = ModelCallCountState("echo_model_calls", "EchoRunner")
            >>> done = state.outcome(1, tool_calls=(), new_messages=(), usage=AgentUsage())
            >>> type(done).__name__
            'TurnCompleted'
        """
        if not tool_calls:
            return TurnCompleted(
                new_messages=new_messages, usage=usage, model_call_metadata=model_call_metadata
            )
        return ToolCallsRequested(
            framework_run_state=self.encode(model_calls),
            tool_calls=tool_calls,
            usage=usage,
            new_messages=new_messages,
            model_call_metadata=model_call_metadata,
        )
