"""Size budgets: what the session stores and returns stays within what Dex can hold and send.

A Dex value (an Attribute, a Channel message, an RPC output) and a Worker task stay under about
4 MiB, the gRPC receive limit of every SDK channel (the embedded engine refuses a value over
4,112,384 bytes). The session measures every text as it will be stored, as the SDK encodes it
(compact JSON, non-ASCII escaped, so an emoji takes 12 bytes), and keeps each within a budget:

- :data:`MAX_STORED_MESSAGE_BYTES` (1 MiB): one stored message, ``framework_item`` included, which
  usually repeats the text. A user message over it is refused where it enters (the RPC returns
  ``False``, ``start_session`` raises ``ConfigurationError``); a model answer with a message over
  it fails that turn at once, not the session.
  A context summary over it fails that turn at once too (the summary is not stored).
- :data:`MAX_TOOL_RESULT_BYTES` (256 KiB): one tool result, an answer to a question, or a
  rejection message, measured as a JSON string. A tool result over it records the call
  ``failed`` with :data:`TOOL_RESULT_TOO_LARGE_ERROR_PREFIX`; an answer over it is refused.
- :data:`MAX_RPC_OUTPUT_BYTES` (3 MiB): ``get_agent_snapshot`` and ``list_agent_messages`` pages,
  whatever was stored. A page holds fewer messages when they are large, at least one; a single
  message larger than a page is returned with its texts cut (:data:`CUT_TEXT_MARKER`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Final

from dex_agents._runner_contract import (
    AgentTurnOutcome,
    ToolCallsRequested,
    ToolExecutionResult,
    ToolInputRequested,
)
from dex_agents._session.message_layout import encoded_json_size
from dex_agents._text_validity import unencodable_text_problem
from dex_agents._values import (
    AgentMessage,
    AgentMessagesPage,
    AgentSnapshot,
    AgentTodo,
    AgentToolCall,
    FrameworkMessage,
)

__all__ = [
    "CUT_TEXT_MARKER",
    "MAX_RPC_OUTPUT_BYTES",
    "MAX_STORED_MESSAGE_BYTES",
    "MAX_TOOL_RESULT_BYTES",
    "TOOL_RESULT_TOO_LARGE_ERROR_PREFIX",
    "fit_message_page",
    "fit_snapshot",
    "oversized_outcome_problem",
    "reply_text_problem",
    "stored_message_size",
    "summary_text_problem",
    "tool_outcome_problem",
    "tool_result_problem",
    "tool_text_within_budget",
    "user_message_problem",
    "user_text_problem",
]

MAX_STORED_MESSAGE_BYTES: Final = 1024 * 1024
"""Largest stored message, as the SDK encodes it, ``framework_item`` included (1 MiB)."""
MAX_TOOL_RESULT_BYTES: Final = 256 * 1024
"""Largest tool result, question answer or rejection message, as a JSON string (256 KiB)."""
MAX_RPC_OUTPUT_BYTES: Final = 3 * 1024 * 1024
"""Largest ``get_agent_snapshot`` output or ``list_agent_messages`` page (3 MiB)."""
TOOL_RESULT_TOO_LARGE_ERROR_PREFIX: Final = "the tool result is too large to store"
"""Start of the error a call records when its result is over :data:`MAX_TOOL_RESULT_BYTES`."""
CUT_TEXT_MARKER: Final = "\n[Dex] The rest of this text was cut: it is too large."
"""Ends a text the session could only keep or return cut: a message alone too large for a
snapshot or page, or a tool's error message over :data:`MAX_TOOL_RESULT_BYTES`."""

# A character takes at most 12 bytes as the SDK encodes it (one outside the BMP is escaped as a
# surrogate pair, "\ud83d\ude00"): the quick checks below multiply by 12, never by 6.
# The largest sequence, turn ID and time a message can carry, so a measured size is an upper bound.
_MEASURE_SEQUENCE: Final = 10**12
_MEASURE_TURN_ID: Final = f"turn-{10**12}"
_MEASURE_TIME: Final = datetime(2000, 1, 1, tzinfo=UTC)
# A snapshot or page of this many characters cannot reach the budget even at 12 bytes each.
_SAFE_CHARACTERS: Final = MAX_RPC_OUTPUT_BYTES // 12 - 64 * 1024


def stored_message_size(message: FrameworkMessage) -> int:
    """Return the bytes ``message`` takes stored, sequence, turn and time included."""
    stored = AgentMessage.from_framework_message(
        message, sequence=_MEASURE_SEQUENCE, turn_id=_MEASURE_TURN_ID, created_at=_MEASURE_TIME
    )
    return encoded_json_size(stored)


def user_message_problem(
    build_user_message: Callable[[str], FrameworkMessage], text: str
) -> str | None:
    """Return why user ``text`` cannot be stored as the message ``build_user_message`` makes of
    it (the runner's), or ``None``.

    Raises:
        RunnerContractError: When the runner's ``build_user_message`` breaks the contract.
    """
    if len(text) * 12 < MAX_STORED_MESSAGE_BYTES // 3:
        return None  # even fully escaped and repeated three times it fits
    size = stored_message_size(build_user_message(text))
    if size <= MAX_STORED_MESSAGE_BYTES:
        return None
    return (
        f"the message is {size} bytes as stored, over the limit of {MAX_STORED_MESSAGE_BYTES} bytes"
    )


def user_text_problem(
    build_user_message: Callable[[str], FrameworkMessage], text: str
) -> str | None:
    """Return why user ``text`` cannot be stored (a lone surrogate, or too large), or ``None``.

    Raises:
        RunnerContractError: When the runner's ``build_user_message`` breaks the contract.
    """
    return unencodable_text_problem(text, "the message") or user_message_problem(
        build_user_message, text
    )


def reply_text_problem(text: str | None, what: str) -> str | None:
    """Return why ``text`` (an answer or rejection message) cannot be stored: a lone surrogate,
    or over :data:`MAX_TOOL_RESULT_BYTES`; ``None`` when it can."""
    if text is not None and (problem := unencodable_text_problem(text, what)) is not None:
        return problem
    size = None if text is None else _size_over(text, MAX_TOOL_RESULT_BYTES)
    if size is None:
        return None
    return f"{what} is {size} bytes as stored, over the limit of {MAX_TOOL_RESULT_BYTES} bytes"


def summary_text_problem(text: str) -> str | None:
    """Return why a context summary's ``text`` cannot be stored, or ``None``: the summary is kept
    and sent with every later model call, so it has the budget of one stored message,
    :data:`MAX_STORED_MESSAGE_BYTES`.

    Example:
        >>> summary_text_problem("The user asked about order 7.") is None
        True
        >>> summary_text_problem("z" * 1_100_000).startswith("the context summary is too large")
        True
    """
    size = _size_over(text, MAX_STORED_MESSAGE_BYTES)
    if size is None:
        return None
    return (
        f"the context summary is too large to store: it is {size} bytes as stored, over the "
        f"limit of {MAX_STORED_MESSAGE_BYTES} bytes"
    )


def tool_result_problem(result: str) -> str | None:
    """Return the error a call records for a ``result`` over the budget, or ``None``.

    Example:
        >>> tool_result_problem("ok") is None
        True
        >>> tool_result_problem("x" * 300_000).startswith(TOOL_RESULT_TOO_LARGE_ERROR_PREFIX)
        True
    """
    size = _size_over(result, MAX_TOOL_RESULT_BYTES)
    if size is None:
        return None
    return (
        f"{TOOL_RESULT_TOO_LARGE_ERROR_PREFIX}: the tool ran, but its result is {size} bytes, "
        f"over the limit of {MAX_TOOL_RESULT_BYTES} bytes, so it was not kept; return less, such "
        "as one page or a summary"
    )


def tool_outcome_problem(outcome: object) -> str | None:
    """Return the error a call records for a tool ``outcome`` too large to store, or ``None``:
    a result, or a question with its choices, over :data:`MAX_TOOL_RESULT_BYTES`."""
    if isinstance(outcome, ToolExecutionResult):
        return tool_result_problem(outcome.output)
    if isinstance(outcome, ToolInputRequested):
        asked = "\n".join((outcome.question, *outcome.choices, outcome.continuation or ""))
        problem = reply_text_problem(asked, "the tool's question with its choices")
        return None if problem is None else f"{TOOL_RESULT_TOO_LARGE_ERROR_PREFIX}: {problem}"
    return None


def tool_text_within_budget(text: str) -> str:
    """Return ``text`` (a tool's error message) cut to fit :data:`MAX_TOOL_RESULT_BYTES`.

    Example:
        >>> len(tool_text_within_budget("x" * 1_000_000)) < 50_000
        True
    """
    if reply_text_problem(text, "") is None:
        return text
    return text[: MAX_TOOL_RESULT_BYTES // 12] + CUT_TEXT_MARKER


def oversized_outcome_problem(outcome: AgentTurnOutcome) -> str | None:
    """Return why the messages or run state of a model call's ``outcome`` cannot be stored."""
    for position, message in enumerate(outcome.new_messages, start=1):
        if _may_exceed(message):
            size = stored_message_size(message)
            if size > MAX_STORED_MESSAGE_BYTES:
                return (
                    f"the model's answer is too large to store: its message {position} is {size} "
                    f"bytes as stored, over the limit of {MAX_STORED_MESSAGE_BYTES} bytes"
                )
    if isinstance(outcome, ToolCallsRequested):
        for call in outcome.tool_calls:
            if len(call.arguments) * 12 + 2 <= MAX_STORED_MESSAGE_BYTES:
                continue
            size = _json_string_size(call.arguments)
            if size > MAX_STORED_MESSAGE_BYTES:
                return (
                    f"the model's tool call {call.tool_call_id} has arguments of {size} bytes "
                    f"as stored, over the limit of {MAX_STORED_MESSAGE_BYTES} bytes"
                )
        state = outcome.framework_run_state
        size = _json_string_size(state) if len(state) * 12 + 2 > MAX_RPC_OUTPUT_BYTES else 0
        if size > MAX_RPC_OUTPUT_BYTES:
            return (
                f"the turn's framework run state is {size} bytes, over the limit of "
                f"{MAX_RPC_OUTPUT_BYTES} bytes: the turn holds too much to continue"
            )
    return None


def fit_snapshot(snapshot: AgentSnapshot) -> AgentSnapshot:
    """Return ``snapshot`` within :data:`MAX_RPC_OUTPUT_BYTES`.

    Everything but the messages gets at most half the budget. While it takes more, the snapshot
    lists, in this order: only the oldest queued and steered message (``queued_message_count``
    still counts every queued one); then the texts of the active turn's tool calls cut; then the
    texts of the pending interrupts cut (every interrupt stays, with its ID, so each can still be
    resolved); then the context summary's text cut; then the plan's todos cut (the first ones,
    their contents cut to 1,024 characters). Each cut part keeps an eighth of the budget and
    every cut text ends in :data:`CUT_TEXT_MARKER`; what is stored stays whole. The messages get
    the rest: the newest that fit, and a single one that does not fit alone with its texts cut.
    """
    if _characters(snapshot.messages) + _other_characters(snapshot) < _SAFE_CHARACTERS:
        return snapshot
    base = replace(snapshot, messages=())
    for cut in _SNAPSHOT_CUTS:
        if encoded_json_size(base) <= MAX_RPC_OUTPUT_BYTES // 2:
            break
        base = cut(base)
    kept = _newest_that_fit(snapshot.messages, MAX_RPC_OUTPUT_BYTES - encoded_json_size(base))
    return replace(base, messages=kept)


# The characters each cut part of a snapshot keeps in all, at up to 12 bytes each.
_PART_CHARACTERS: Final = MAX_RPC_OUTPUT_BYTES // (8 * 12)


def _oldest_listed_only(snapshot: AgentSnapshot) -> AgentSnapshot:
    return replace(
        snapshot,
        queued_messages=snapshot.queued_messages[:1],
        steered_messages=snapshot.steered_messages[:1],
    )


def _cut_tool_calls(snapshot: AgentSnapshot) -> AgentSnapshot:
    records = snapshot.tool_calls
    share = _share(len(records) * 8)
    return replace(snapshot, tool_calls=tuple(_cut_record(r, share) for r in records))


def _cut_interrupts(snapshot: AgentSnapshot) -> AgentSnapshot:
    interrupts = snapshot.pending_interrupts
    share = _share(len(interrupts) * 3)
    return replace(
        snapshot,
        pending_interrupts=tuple(
            replace(
                interrupt,
                arguments=_cut_text(interrupt.arguments, share),
                question=_cut_text(interrupt.question, share),
                choices=_cut_texts(interrupt.choices, share),
            )
            for interrupt in interrupts
        ),
    )


def _cut_context_summary(snapshot: AgentSnapshot) -> AgentSnapshot:
    summary = snapshot.context_summary
    if summary is None:
        return snapshot
    text = _cut_text(summary.text, _PART_CHARACTERS) or ""
    return replace(snapshot, context_summary=replace(summary, text=text))


def _cut_plan(snapshot: AgentSnapshot) -> AgentSnapshot:
    plan = snapshot.plan
    if plan is None or not plan.todos:
        return snapshot
    room = MAX_RPC_OUTPUT_BYTES // 8
    todos: list[AgentTodo] = []
    for todo in plan.todos:
        content = _cut_text(todo.content, _TODO_CHARACTERS) or ""
        room -= len(content) * 12 + 64  # a todo's fields besides its content take < 64 bytes
        if room < 0 and todos:
            break
        todos.append(replace(todo, content=content))
    if len(todos) < len(plan.todos) and not todos[-1].content.endswith(CUT_TEXT_MARKER):
        todos[-1] = replace(todos[-1], content=todos[-1].content + CUT_TEXT_MARKER)
    return replace(snapshot, plan=replace(plan, todos=tuple(todos)))


_TODO_CHARACTERS: Final = 1024
"""The characters a todo of a cut plan keeps."""


_SNAPSHOT_CUTS: Final = (
    _oldest_listed_only,
    _cut_tool_calls,
    _cut_interrupts,
    _cut_context_summary,
    _cut_plan,
)
"""What a snapshot too large gives up, in order (see :func:`fit_snapshot`)."""


def _share(texts: int) -> int:
    """Characters each of ``texts`` texts of one cut part keeps (its marker aside)."""
    return _PART_CHARACTERS // max(texts, 1)


def fit_message_page(page: AgentMessagesPage) -> AgentMessagesPage:
    """Return ``page`` within :data:`MAX_RPC_OUTPUT_BYTES`: its oldest messages that fit, at
    least one (cut when it does not fit alone), with ``next_after_sequence`` after the last."""
    if _characters(page.messages) < _SAFE_CHARACTERS:
        return page
    room = MAX_RPC_OUTPUT_BYTES - encoded_json_size(replace(page, messages=())) - 64
    kept: list[AgentMessage] = []
    for message in page.messages:
        size = encoded_json_size(message) + 1
        if size > room:
            if not kept:
                kept.append(_cut(message, room))
            break
        kept.append(message)
        room -= size
    if len(kept) == len(page.messages):
        return page
    return replace(page, messages=tuple(kept), next_after_sequence=kept[-1].sequence)


def _newest_that_fit(messages: Sequence[AgentMessage], room: int) -> tuple[AgentMessage, ...]:
    kept: list[AgentMessage] = []
    for message in reversed(messages):
        size = encoded_json_size(message) + 1
        if size > room:
            if not kept and room > 4096:
                kept.append(_cut(message, room))
            break
        kept.append(message)
        room -= size
    return tuple(reversed(kept))


def _cut_record(record: AgentToolCall, share: int) -> AgentToolCall:
    """``record`` with each of its texts cut to ``share`` characters."""
    return replace(
        record,
        arguments=_cut_text(record.arguments, share) or "",
        output=_cut_text(record.output, share),
        error=_cut_text(record.error, share),
        rejection_message=_cut_text(record.rejection_message, share),
        question=_cut_text(record.question, share),
        choices=_cut_texts(record.choices, share),
        input_continuation=_cut_text(record.input_continuation, share),
        input_answers=tuple(
            replace(
                answer,
                question=_cut_text(answer.question, share) or "",
                answer=_cut_text(answer.answer, share),
            )
            for answer in record.input_answers
        ),
    )


def _cut(message: AgentMessage, room: int) -> AgentMessage:
    """``message`` with its texts cut so it encodes within ``room`` bytes, and marked."""
    present = sum(
        1
        for text in (message.text, message.tool_arguments, message.tool_output)
        if text is not None
    )
    # Each text may be escaped to 12 bytes per character (a character outside the BMP).
    share = max((room - 2048) // (12 * (present + 1)), 0)
    return replace(
        message,
        framework_item=_cut_text(message.framework_item, share) or "",
        text=_cut_text(message.text, share),
        tool_arguments=_cut_text(message.tool_arguments, share),
        tool_output=_cut_text(message.tool_output, share),
    )


def _cut_text(text: str | None, share: int) -> str | None:
    """``text`` cut to ``share`` characters and marked, when it is longer."""
    if text is None or len(text) <= share + len(CUT_TEXT_MARKER):
        return text  # cutting it would not make it shorter
    return text[:share] + CUT_TEXT_MARKER


def _cut_texts(texts: tuple[str, ...], share: int) -> tuple[str, ...]:
    """``texts`` (such as a question's choices) sharing ``share`` characters, each marked when
    cut; all of them stay, so an answer can still name any."""
    each = share // max(len(texts), 1)
    return tuple(_cut_text(text, each) or "" for text in texts)


def _may_exceed(message: FrameworkMessage) -> bool:
    total = sum(
        len(text)
        for text in (
            message.framework_item,
            message.text,
            message.tool_arguments,
            message.tool_output,
        )
        if text
    )
    return total * 12 + 1024 > MAX_STORED_MESSAGE_BYTES


def _characters(messages: Sequence[AgentMessage]) -> int:
    return sum(
        len(message.framework_item)
        + len(message.text or "")
        + len(message.tool_arguments or "")
        + len(message.tool_output or "")
        + 256
        for message in messages
    )


def _other_characters(snapshot: AgentSnapshot) -> int:
    """Roughly the characters of everything in ``snapshot`` but its messages (an upper bound of
    the texts, plus a generous allowance per item)."""
    listed = (*snapshot.queued_messages, *snapshot.steered_messages)
    records = sum(
        len(record.arguments)
        + len(record.output or "")
        + len(record.error or "")
        + len(record.rejection_message or "")
        + len(record.question or "")
        + sum(len(choice) + 16 for choice in record.choices)
        + len(record.input_continuation or "")
        + sum(len(a.question) + len(a.answer or "") + 128 for a in record.input_answers)
        + 1024
        for record in snapshot.tool_calls
    )
    interrupts = sum(
        len(interrupt.arguments or "")
        + len(interrupt.question or "")
        + sum(len(choice) + 16 for choice in interrupt.choices)
        + 512
        for interrupt in snapshot.pending_interrupts
    )
    summary = len(snapshot.context_summary.text) if snapshot.context_summary is not None else 0
    plan = (
        sum(len(todo.content) + 64 for todo in snapshot.plan.todos)
        if snapshot.plan is not None
        else 0
    )
    return (
        sum(len(item.text) + 128 for item in listed)
        + records
        + interrupts
        + summary
        + plan
        + 64 * 1024
    )


def _size_over(text: str, limit: int) -> int | None:
    """The bytes ``text`` takes as a stored JSON string when over ``limit``, else ``None``
    (measured only when it could be over)."""
    if len(text) * 12 + 2 <= limit:
        return None
    size = _json_string_size(text)
    return size if size > limit else None


def _json_string_size(text: str) -> int:
    return len(json.dumps(text))
