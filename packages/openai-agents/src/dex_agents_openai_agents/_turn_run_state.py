"""The framework run state between two model calls of one turn: the active agent and the count.

Every item of the turn is stored as it appears, so the next ``RunModel`` rebuilds the SDK's input
from committed messages and records; the run state only says which agent makes the next call (a
handoff switches it) and how many model calls the turn made, for ``max_turns``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from dex_agents import dump_json_text
from dex_agents.exceptions import StoredStateError

__all__ = ["TurnRunState"]

_AGENT_KEY: Final = "openai_agents_agent"
_MODEL_CALLS_KEY: Final = "openai_agents_model_calls"


@dataclass(frozen=True)
class TurnRunState:
    """Which agent makes the turn's next model call, and how many the turn made so far."""

    agent: str
    model_calls: int

    def encode(self) -> str:
        """The ``framework_run_state`` text."""
        return dump_json_text({_AGENT_KEY: self.agent, _MODEL_CALLS_KEY: self.model_calls})

    @classmethod
    def decode(cls, text: str | None) -> TurnRunState | None:
        """Read ``framework_run_state``; ``None`` for a turn's first model call.

        Raises:
            ValueError: When the text is not a run state of this adapter.
        """
        if text is None:
            return None
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        agent = value.get(_AGENT_KEY) if isinstance(value, dict) else None
        calls = value.get(_MODEL_CALLS_KEY) if isinstance(value, dict) else None
        if (
            not isinstance(agent, str)
            or not isinstance(calls, int)
            or isinstance(calls, bool)
            or calls < 1
        ):
            raise StoredStateError(
                f"framework run state {text[:80]!r} is not a dex-agents-openai-agents run state"
            )
        return cls(agent, calls)
