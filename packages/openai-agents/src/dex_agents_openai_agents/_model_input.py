"""The input of one model call, from committed state only: notes, stored items, recorded results.

The input is the summary note (once the session compacted), every stored item, the plan note
before this turn's items, and one ``function_call_output`` per call of the previous response,
rendered from the call's final record. A call ID the model gave again (such as ``call_0`` of a
server that numbers calls per response) is told apart in the input, not in the stored items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents import Agent, FunctionTool
from dex_agents import (
    BUILT_IN_TOOL_DEFINITIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
    AgentTurnContext,
    FrameworkMessage,
    JsonObject,
    build_plan_note,
    dump_json_text,
    estimate_text_tokens,
)
from dex_agents.adapters import recorded_tool_result

from dex_agents_openai_agents._agent_graph import agent_handoffs
from dex_agents_openai_agents._repeated_call_ids import distinct_call_ids
from dex_agents_openai_agents._transcript import (
    StoredCall,
    Transcript,
    function_call_output_item,
    stored_message,
    user_message_item,
)

__all__ = ["PendingResult", "fixed_input_tokens", "model_input", "pending_results"]


@dataclass(frozen=True)
class PendingResult:
    """The result of one call of the previous response, from its final record."""

    call: StoredCall
    output: str

    @property
    def item(self) -> JsonObject:
        """The ``function_call_output`` item."""
        return function_call_output_item(self.call.call_id, self.output)

    def message(self, agent: str) -> FrameworkMessage:
        """The message that stores the result, while ``agent`` is active."""
        return stored_message(self.item, agent, tool_name=self.call.tool_name)


def pending_results(turn: AgentTurnContext, transcript: Transcript) -> list[PendingResult]:
    """The results of this turn's stored calls that have none stored yet.

    A call without a final record reads as the outcome-unknown result.
    """
    results = []
    for call in transcript.unanswered_calls:
        output = recorded_tool_result(turn.recorded_tool_call(call.call_id))
        results.append(PendingResult(call, output))
    return results


def model_input(
    turn: AgentTurnContext, transcript: Transcript, pending: list[PendingResult]
) -> list[JsonObject]:
    """The items of the model call: notes, stored items, then the pending results; an earlier
    use of a call ID the model gave again gets an ID of its own (``distinct_call_ids``)."""
    items = list(transcript.items)
    note = build_plan_note(turn.plan, turn.interaction_mode)
    if note is not None:
        items.insert(transcript.turn_start, user_message_item(note))
    if turn.context_summary is not None:
        summary = f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{turn.context_summary.text}"
        items.insert(0, user_message_item(summary))
    items.extend(result.item for result in pending)
    return distinct_call_ids(items)


def fixed_input_tokens(
    agent: Agent[Any], turn: AgentTurnContext, pending: list[PendingResult]
) -> int:
    """What a model call adds to the stored items: instructions, tools, notes, pending results.

    Instructions count only when they are text; a function's result is unknown without a run.
    """
    parts: list[str] = [dump_json_text(result.item) for result in pending]
    if isinstance(agent.instructions, str):
        parts.append(agent.instructions)
    note = build_plan_note(turn.plan, turn.interaction_mode)
    if note is not None:
        parts.append(note)
    definitions: list[object] = [
        {"name": tool.name, "description": tool.description, "parameters": tool.params_json_schema}
        for tool in agent.tools
        if isinstance(tool, FunctionTool)
    ]
    definitions.extend(
        {"name": h.tool_name, "description": h.tool_description, "parameters": h.input_json_schema}
        for h in agent_handoffs(agent).values()
    )
    definitions.extend(
        {"name": d.name.value, "description": d.description, "parameters": d.parameters}
        for d in BUILT_IN_TOOL_DEFINITIONS
        if d.name.value in turn.enabled_built_in_tools
    )
    parts.append(dump_json_text(definitions))
    return sum(estimate_text_tokens(part) for part in parts)
