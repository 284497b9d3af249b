"""The private checkpointer of one Step's graph run: LangGraph's ``InMemorySaver``, keeping
checkpoint values as the objects themselves.

A Step runs the graph with a checkpointer only so that LangGraph can start at a given node and
report where it stopped; the checkpointer is thrown away with the Step. ``InMemorySaver``'s default
serializer writes every checkpoint's channel values as msgpack and reads them back, the whole
message history at each super-step and at ``get_state``: about an eighth of a LangGraph Worker's
CPU at turn 30, growing with the session. Nothing outside the run ever reads these checkpoints, so
they keep the values as they are, as LangGraph's channels already hold them during a run.
"""

from __future__ import annotations

from typing import Any, Final, cast

from dex_agents.exceptions import StoredStateError
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.base import SerializerProtocol

__all__ = ["step_checkpointer"]

_KEPT_TYPE: Final = "dex_agents_kept_object"


class _KeptObjects(SerializerProtocol):
    """A "serializer" that keeps each value itself (``InMemorySaver`` stores it as given)."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return _KEPT_TYPE, cast(bytes, obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, value = data
        if kind != _KEPT_TYPE:
            raise StoredStateError(f"not a value this Step's checkpointer kept: {kind!r}")
        return value


def step_checkpointer() -> InMemorySaver:
    """A new checkpointer for one Step's graph run (see the module docstring)."""
    return InMemorySaver(serde=_KeptObjects())
