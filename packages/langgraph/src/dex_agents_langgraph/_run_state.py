"""The framework run state of a turn that waits for tool calls: where the graph stopped.

The messages are stored as session messages, so the run state keeps only what they do not hold:
the tool node(s) the graph stopped before, which the next ``RunModel`` resumes the graph as, and the
graph's other state channels (everything but the messages channel), serialized with LangGraph's
own checkpoint serializer so any value a checkpointer could store survives a Worker crash.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from dex_agents import dump_json_text
from dex_agents.exceptions import StoredStateError
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

__all__ = ["GraphRunState"]

_FORMAT: Final = "dex-agents-langgraph/1"
_SERDE: Final = JsonPlusSerializer()


@dataclass(frozen=True)
class GraphRunState:
    """Where a turn's graph stopped before its tool calls.

    Attributes:
        resume_node: The tool node the graph stopped before; the next ``RunModel`` writes the
            tool results as that node's update, so the graph goes on along that node's edges.
        channels: The graph's state channels other than the messages channel, at the stop.
    """

    resume_node: str
    channels: Mapping[str, Any] = field(default_factory=dict)

    def encode(self) -> str:
        """The run state text ``ToolCallsRequested.framework_run_state`` carries."""
        channels: str | None = None
        if self.channels:
            type_name, data = _SERDE.dumps_typed(dict(self.channels))
            channels = f"{type_name}:{base64.b64encode(data).decode('ascii')}"
        return dump_json_text(
            {"format": _FORMAT, "resume_node": self.resume_node, "channels": channels}
        )

    @classmethod
    def decode(cls, text: str) -> GraphRunState:
        """Read a run state that :meth:`encode` wrote.

        Raises:
            ValueError: When ``text`` is not a LangGraph runner's run state.
        """
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict) or value.get("format") != _FORMAT:
            raise StoredStateError(
                f"framework run state {text[:80]!r} is not a dex-agents-langgraph run state"
            )
        resume_node = value.get("resume_node")
        if not isinstance(resume_node, str) or not resume_node:
            raise StoredStateError(f"framework run state {text[:80]!r} names no node to resume as")
        encoded = value.get("channels")
        channels: Mapping[str, Any] = {}
        if isinstance(encoded, str):
            type_name, _, data = encoded.partition(":")
            channels = _SERDE.loads_typed((type_name, base64.b64decode(data)))
        return cls(resume_node=resume_node, channels=channels)
