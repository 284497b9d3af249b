"""How a Stepwise agent compacts: where it may cut, and the summary call's request.

Stepwise stores every item of a turn as it appears, so it can compact in the middle of a turn. It
cuts only between model responses whose tool calls all have stored results, so the summarized part
and the kept part never separate a tool call from its result. The summary call sends
``CONTEXT_SUMMARY_INSTRUCTIONS``, no tools, the previous summary, and the messages to summarize as
model input items; when they do not fit ``input_token_budget`` together with the definition's
``max_output_tokens``, the oldest whole responses are left out and the omission note says how many
messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from dex_agents._compaction import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_TRANSCRIPT_HEADER,
    build_context_summary_note,
    build_context_summary_omission_note,
    estimate_text_tokens,
)
from dex_agents._runner_contract import OUTCOME_UNKNOWN_TOOL_RESULT, ContextSummaryRequest
from dex_agents._values import AgentMessage
from dex_agents.exceptions import ConfigurationError
from dex_agents.stepwise._input_items import (
    StoredModelOutput,
    decode_message,
    read_transcript,
)
from dex_agents.stepwise._model_client import (
    ModelInputItem,
    ModelRequest,
    ModelToolResult,
    ModelUserText,
)

__all__ = [
    "CONTEXT_SUMMARY_REQUEST_NOTE",
    "build_summary_model_request",
    "response_boundaries",
    "select_response_boundary_cutoff",
]

CONTEXT_SUMMARY_REQUEST_NOTE: Final = "[Dex] End of the transcript. Write the new summary now."
"""The last input item of a summary call, so the model answers with the summary."""


def response_boundaries(messages: Sequence[AgentMessage]) -> list[int]:
    """Return the positions ``i`` after which ``messages`` may be cut, oldest first.

    A cut after ``messages[i]`` is allowed when the next message starts user text or a new model
    response and every tool call before the cut has its result stored before the cut. A user text
    closes the calls before it that never got a result, as the transcript does.

    Example:
        >>> [message.role.value for message in messages]
        ['user', 'assistant', 'user']
        >>> response_boundaries(messages)
        [0, 1]
    """
    boundaries: list[int] = []
    pending: set[str] = set()
    response_key: str | None = None
    decoded = [decode_message(message) for message in messages]
    for position, stored in enumerate(decoded):
        if isinstance(stored, ModelToolResult):
            pending.discard(stored.tool_call_id)
        elif isinstance(stored, StoredModelOutput):
            response_key = stored.response_key
            call = stored.item.tool_call
            if call is not None:
                pending.add(call.tool_call_id)
        else:
            pending.clear()
            response_key = None
        if position + 1 < len(decoded) and not pending:
            following = decoded[position + 1]
            starts_unit = isinstance(following, ModelUserText) or (
                isinstance(following, StoredModelOutput) and following.response_key != response_key
            )
            if starts_unit:
                boundaries.append(position)
    return boundaries


def select_response_boundary_cutoff(
    messages: Sequence[AgentMessage], retained_token_budget: int
) -> int | None:
    """Return the sequence of the last message to summarize, or ``None`` when no cut exists.

    Picks the oldest response boundary whose later messages fit ``retained_token_budget``
    (three UTF-8 bytes per token over each stored item), else the newest boundary.

    Raises:
        ConfigurationError: When ``retained_token_budget`` is negative.

    Example:
        >>> select_response_boundary_cutoff(messages, retained_token_budget=10)
        2
    """
    if retained_token_budget < 0:
        raise ConfigurationError(
            f"retained_token_budget must not be negative, got {retained_token_budget}"
        )
    boundaries = response_boundaries(messages)
    if not boundaries:
        return None
    tokens = [estimate_text_tokens(message.framework_item) for message in messages]
    remaining = sum(tokens)
    cursor = 0
    for boundary in boundaries:
        while cursor <= boundary:
            remaining -= tokens[cursor]
            cursor += 1
        if remaining <= retained_token_budget:
            return messages[boundary].sequence
    return messages[boundaries[-1]].sequence


def build_summary_model_request(
    request: ContextSummaryRequest,
    *,
    estimate_input_tokens: Callable[[ModelRequest], int],
    max_output_tokens: int | None,
) -> ModelRequest:
    """Return the summary call's ModelRequest, fitted to ``request.input_token_budget``.

    The input is the transcript header, the previous summary, the omission note when the oldest
    messages are left out, the messages as model input items, and a closing note; no tools. The
    oldest messages are left out at response boundaries only, as few as fit the budget together
    with ``max_output_tokens``; when not even the newest response fits, every message is left out.

    Example:
        >>> from dex_agents import ContextSummaryRequest
        >>> from dex_agents.stepwise import ScriptedModelClient, ScriptedModelReply
        >>> model = ScriptedModelClient(lambda request: ScriptedModelReply(text="A summary."))
        >>> request = ContextSummaryRequest("session-42", "turn-2", 1, None, messages, 4_000)
        >>> summary_request = build_summary_model_request(
        ...     request, estimate_input_tokens=model.estimate_input_tokens, max_output_tokens=2_000)
        >>> summary_request.tools, summary_request.instructions == CONTEXT_SUMMARY_INSTRUCTIONS
        ((), True)
    """
    messages = request.messages
    reserved = max_output_tokens or 0
    starts = [0, *(boundary + 1 for boundary in response_boundaries(messages))]

    def fits(start: int) -> bool:
        candidate = _summary_request(request, start)
        return estimate_input_tokens(candidate) + reserved <= request.input_token_budget

    # Fitting is monotonic in the start: a later start only leaves out more.
    low, high = 0, len(starts)
    while low < high:
        middle = (low + high) // 2
        if fits(starts[middle]):
            high = middle
        else:
            low = middle + 1
    start = starts[low] if low < len(starts) else len(messages)
    return _summary_request(request, start)


def _summary_request(request: ContextSummaryRequest, start: int) -> ModelRequest:
    kept = request.messages[start:]
    items: list[ModelInputItem] = [ModelUserText(CONTEXT_SUMMARY_TRANSCRIPT_HEADER)]
    if request.previous_summary is not None:
        items.append(ModelUserText(build_context_summary_note(request.previous_summary)))
    if start:
        items.append(ModelUserText(build_context_summary_omission_note(start)))
    transcript = read_transcript(kept, lambda call: OUTCOME_UNKNOWN_TOOL_RESULT)
    items.extend(transcript.input)
    # A summarized response's calls without stored results read as outcome unknown.
    items.extend(
        ModelToolResult(call.tool_call_id, call.tool_name, OUTCOME_UNKNOWN_TOOL_RESULT)
        for call in transcript.unanswered_calls
    )
    items.append(ModelUserText(CONTEXT_SUMMARY_REQUEST_NOTE))
    return ModelRequest(instructions=CONTEXT_SUMMARY_INSTRUCTIONS, input=tuple(items), tools=())
