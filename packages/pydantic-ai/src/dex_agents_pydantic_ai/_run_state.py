"""The framework run state between a turn's model calls, and the tool results that resume it.

The messages of a turn are stored as they appear, so the run state holds only what Pydantic AI
keeps across the calls of one run: the tool calls it waits for, as a ``DeferredToolRequests``, and
the turn's ``RunUsage``, so ``UsageLimits`` (such as the request limit) count the whole turn. The
next ``RunModel`` answers the requests with a ``DeferredToolResults`` built from the final records.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from dex_agents import (
    AgentToolCall,
    AgentToolCallStatus,
)
from dex_agents.adapters import recorded_tool_result, tool_result_is_error
from dex_agents.exceptions import StoredStateError
from pydantic import TypeAdapter, ValidationError
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolDenied, ToolFailed
from pydantic_ai.messages import ToolCallPart, ToolReturnPart
from pydantic_ai.usage import RunUsage

__all__ = ["PydanticAIRunState", "deferred_tool_results", "recorded_tool_return"]

_RUN_STATE_KEY: Final = "pydantic_ai_run_state"
_REQUESTS_ADAPTER: Final = TypeAdapter(DeferredToolRequests)
_USAGE_ADAPTER: Final = TypeAdapter(RunUsage)


@dataclass(frozen=True)
class PydanticAIRunState:
    """The run state of a turn between two model calls."""

    requests: DeferredToolRequests
    usage: RunUsage

    def encode(self) -> str:
        """The ``framework_run_state`` text."""
        return json.dumps(
            {
                _RUN_STATE_KEY: {
                    "deferred_tool_requests": json.loads(
                        _REQUESTS_ADAPTER.dump_json(self.requests)
                    ),
                    "usage": json.loads(_USAGE_ADAPTER.dump_json(self.usage)),
                }
            },
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, text: str) -> PydanticAIRunState:
        """Read a ``framework_run_state``.

        Raises:
            ValueError: When the text is not a Pydantic AI runner's run state.
        """
        try:
            state = json.loads(text)[_RUN_STATE_KEY]
            return cls(
                requests=_REQUESTS_ADAPTER.validate_python(state["deferred_tool_requests"]),
                usage=_USAGE_ADAPTER.validate_python(state["usage"]),
            )
        except (ValueError, KeyError, TypeError, ValidationError) as error:
            raise StoredStateError(
                f"framework run state {text[:80]!r} is not a Pydantic AI runner's run state"
            ) from error


def deferred_tool_results(
    requests: DeferredToolRequests, records: Mapping[str, AgentToolCall]
) -> DeferredToolResults:
    """Answer every pending call from its final record.

    A succeeded call returns its output, a failed one is a ``ToolFailed`` with its error, a call a
    person rejected is a ``ToolDenied`` with the rejection text, and any other outcome (steered,
    cancelled, outcome unknown, or no record) returns the model-visible text of the core.
    """
    results = DeferredToolResults()
    for call in [*requests.calls, *requests.approvals]:
        record = records.get(call.tool_call_id)
        kind, text = _outcome(record)
        if kind == "denied":
            results.approvals[call.tool_call_id] = ToolDenied(text)
        elif kind == "failed":
            results.calls[call.tool_call_id] = ToolFailed(text)
        else:
            results.calls[call.tool_call_id] = text
    return results


def recorded_tool_return(call: ToolCallPart, record: AgentToolCall | None) -> ToolReturnPart:
    """The ``ToolReturnPart`` that Pydantic AI builds for ``call`` from its record's outcome."""
    kind, text = _outcome(record)
    outcome: Literal["denied", "failed", "success"] = (
        "denied" if kind == "denied" else "failed" if kind == "failed" else "success"
    )
    return ToolReturnPart(
        tool_name=call.tool_name, content=text, tool_call_id=call.tool_call_id, outcome=outcome
    )


def _outcome(record: AgentToolCall | None) -> tuple[str, str]:
    """``(kind, text)``: kind ``denied``, ``failed`` or ``returned``, and the model-visible text."""
    text = recorded_tool_result(record)
    if record is None:
        return "returned", text
    if tool_result_is_error(record):
        return "failed", record.error or "the tool call failed"
    if (
        record.status is AgentToolCallStatus.REJECTED
        and record.cancellation_reason is None
        and record.error is None
    ):
        # A person's rejection: Pydantic AI's own denial. A rejection by the session (a declined
        # question, a planning turn's other tool) returns its text as the core renders it.
        return "denied", text
    return "returned", text
