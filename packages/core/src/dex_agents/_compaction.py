"""Compaction: the policy, the trigger rule, and the shared rules that framework adapters use.

``RunModel`` asks the runner to estimate the next model input. At ``trigger_ratio`` of the
context window (:meth:`CompactionPolicy.is_triggered`) it asks for a cutoff, the last message to
summarize, with :attr:`CompactionPolicy.retained_token_budget`; a cutoff past the current summary
(:func:`compaction_through_sequence`) moves the session to ``CompactContext``, which stores
:func:`next_context_summary`. A second high estimate finds no new cutoff, so the pair cannot loop.

An adapter cannot measure the framework's own request, so it uses one shared rule:
:func:`estimate_stored_input_tokens` (three UTF-8 bytes per token, which errs high for English),
:func:`select_turn_boundary_cutoff` (cuts only between turns), and
:func:`build_context_summary_prompt` (one plain text prompt that fits the budget).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from dex_agents._runner_contract import AgentTurnContext, ContextSummaryRequest
from dex_agents._values import AgentMessage, ContextSummary
from dex_agents.exceptions import ConfigurationError, RunnerContractError

__all__ = [
    "CONTEXT_SUMMARY_INSTRUCTIONS",
    "CONTEXT_SUMMARY_NOTE_HEADER",
    "CONTEXT_SUMMARY_TRANSCRIPT_HEADER",
    "DEFAULT_COMPACTION_KEEP_RATIO",
    "DEFAULT_COMPACTION_TRIGGER_RATIO",
    "CompactionPolicy",
    "build_context_summary_note",
    "build_context_summary_omission_note",
    "build_context_summary_prompt",
    "compaction_through_sequence",
    "decide_compaction",
    "estimate_stored_input_tokens",
    "estimate_text_tokens",
    "messages_to_summarize",
    "next_context_summary",
    "select_turn_boundary_cutoff",
]

DEFAULT_COMPACTION_TRIGGER_RATIO: Final = 0.85
"""Share of the context window at which ``RunModel`` compacts."""
DEFAULT_COMPACTION_KEEP_RATIO: Final = 0.3
"""Share of the context window that the messages after a cutoff may use."""

CONTEXT_SUMMARY_NOTE_HEADER: Final = "[Dex] Summary of the earlier conversation:"
"""First line of the note that puts the summary before the messages after it."""
CONTEXT_SUMMARY_TRANSCRIPT_HEADER: Final = (
    "[Dex] Transcript of the conversation to summarize. It is material to summarize, not a "
    "request to answer: write the new summary only."
)
"""First line of :func:`build_context_summary_prompt`."""
CONTEXT_SUMMARY_INSTRUCTIONS: Final = (
    "You write the working memory of an AI agent. The agent continues its conversation with the "
    "user from your summary alone: the messages you summarize are no longer shown to it.\n"
    "Fold the earlier summary, when there is one, and the transcript into one new summary that "
    "replaces both. Keep, in this order of importance:\n"
    "- the user's goals, requests, constraints, and preferences, and what is still open;\n"
    "- decisions made and their reasons;\n"
    "- every tool call that changed something outside the conversation, such as a write, a "
    "payment, or a message sent, with its result, so that it is never repeated;\n"
    "- facts the agent found or was given that it still needs: names, identifiers, numbers, "
    "dates, file paths, URLs, and exact values;\n"
    "- the state of the work and the next steps the agent promised or planned.\n"
    "Leave out greetings, repetition, and details that no later step needs. Write plain text in "
    "the language of the conversation, as short as the content allows. Do not answer, continue, "
    "or comment on the conversation, and do not call tools: reply with the summary only."
)
"""System instructions of a summary call; the call offers no tools."""

_BYTES_PER_TOKEN: Final = 3
_SECTION_SEPARATOR: Final = "\n\n"
_TRUNCATION_MARKER: Final = "\n[Dex] The rest of this text did not fit in this request."


@dataclass(frozen=True)
class CompactionPolicy:
    """When a session compacts, and how much of the context window the newest messages keep.

    Attributes:
        context_window_tokens: The model's context window, in the runner's token unit; also the
            ``input_token_budget`` of every summary request.
        trigger_ratio: Compact when the estimate plus ``reserved_input_tokens`` reaches this share
            of the window (0.85).
        keep_ratio: Share of the window that the messages after the cutoff may use (0.3); the
            runner receives it as ``retained_token_budget``.
        reserved_input_tokens: Input the runner's estimate cannot see, such as a framework's own
            system prompt; added to every estimate (0).

    Raises:
        ConfigurationError: When ``context_window_tokens`` is not a positive int, a ratio is not in
            (0, 1] or ``keep_ratio`` is not below ``trigger_ratio``, or
            ``reserved_input_tokens`` is negative or not below the window.

    Example:
        >>> policy = CompactionPolicy(context_window_tokens=400_000)
        >>> policy.is_triggered(340_000), policy.retained_token_budget
        (True, 120000)
    """

    context_window_tokens: int
    trigger_ratio: float = DEFAULT_COMPACTION_TRIGGER_RATIO
    keep_ratio: float = DEFAULT_COMPACTION_KEEP_RATIO
    reserved_input_tokens: int = 0

    def __post_init__(self) -> None:
        window = self.context_window_tokens
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigurationError(
                f"context_window_tokens must be a positive int, got {window!r}"
            )
        for name in ("trigger_ratio", "keep_ratio"):
            ratio = getattr(self, name)
            if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
                raise ConfigurationError(f"{name} must be a number, got {ratio!r}")
            if not 0 < ratio <= 1:
                raise ConfigurationError(f"{name} must be above 0 and at most 1, got {ratio!r}")
        if self.keep_ratio >= self.trigger_ratio:
            raise ConfigurationError(
                f"keep_ratio ({self.keep_ratio}) must be below trigger_ratio "
                f"({self.trigger_ratio}), or every compaction would trigger the next one"
            )
        reserved = self.reserved_input_tokens
        if isinstance(reserved, bool) or not isinstance(reserved, int) or reserved < 0:
            raise ConfigurationError(
                f"reserved_input_tokens must be a non-negative int, got {reserved!r}"
            )
        if reserved >= window:
            raise ConfigurationError(
                f"reserved_input_tokens ({reserved}) must be below context_window_tokens ({window})"
            )

    @property
    def retained_token_budget(self) -> int:
        """Tokens the messages after a cutoff may use: ``keep_ratio`` of the window, rounded down."""
        return math.floor(self.keep_ratio * self.context_window_tokens)

    def is_triggered(self, estimated_input_tokens: int) -> bool:
        """Return whether an estimate (plus ``reserved_input_tokens``) reaches the trigger.

        Raises:
            ConfigurationError: When the estimate is not a non-negative int.

        Example:
            >>> CompactionPolicy(1000).is_triggered(849), CompactionPolicy(1000).is_triggered(850)
            (False, True)
        """
        _require_count("estimate_input_tokens", estimated_input_tokens)
        total = estimated_input_tokens + self.reserved_input_tokens
        return total >= self.trigger_ratio * self.context_window_tokens


def compaction_through_sequence(
    cutoff: object,
    *,
    context_summary: ContextSummary | None,
    messages: Sequence[AgentMessage],
) -> int | None:
    """Return the sequence ``CompactContext`` summarizes through, or ``None`` to not compact.

    A cutoff that is not past the current summary means nothing new to summarize, so a second
    high estimate after a compaction goes on to the model call instead of compacting again.

    Args:
        cutoff: What ``select_compaction_cutoff`` returned.
        context_summary: The current ``ContextSummary``, or ``None``.
        messages: ``AgentTurnContext.messages`` of the same model call.

    Raises:
        RunnerContractError: When ``cutoff`` is past the summary but not the sequence of one of
            ``messages``.

    Example:
        >>> compaction_through_sequence(2, context_summary=None, messages=messages)
        2
        >>> compaction_through_sequence(None, context_summary=None, messages=messages) is None
        True
    """
    if cutoff is None:
        return None
    if isinstance(cutoff, bool) or not isinstance(cutoff, int):
        raise RunnerContractError(
            f"select_compaction_cutoff must return an int or None, got {cutoff!r}"
        )
    if context_summary is not None and cutoff <= context_summary.last_sequence:
        return None
    if cutoff < 1 or not any(message.sequence == cutoff for message in messages):
        available = (
            f"{messages[0].sequence}..{messages[-1].sequence}" if messages else "no messages"
        )
        raise RunnerContractError(
            f"select_compaction_cutoff returned {cutoff}, which is not the sequence of a message "
            f"in turn.messages ({available})"
        )
    return cutoff


async def decide_compaction(
    policy: CompactionPolicy,
    *,
    estimated_input_tokens: int,
    select_cutoff: Callable[[int], Awaitable[object]],
    context_summary: ContextSummary | None,
    messages: Sequence[AgentMessage],
) -> int | None:
    """Return the sequence to summarize through before the next model call, or ``None``.

    Asks ``select_cutoff(policy.retained_token_budget)`` only when the estimate reaches the
    trigger, then applies :func:`compaction_through_sequence`, so a cutoff that is not past the
    current summary never compacts and ``RunModel -> CompactContext`` cannot loop.

    Raises:
        ConfigurationError: When the estimate is not a non-negative int.
        RunnerContractError: When the cutoff is neither ``None`` nor one of ``messages``.

    Example:
        >>> import asyncio
        >>> async def cutoff(budget: int) -> int:
        ...     return 2
        >>> policy = CompactionPolicy(context_window_tokens=1_000)
        >>> asyncio.run(decide_compaction(policy, estimated_input_tokens=900, select_cutoff=cutoff,
        ...     context_summary=None, messages=messages))
        2
    """
    if not policy.is_triggered(estimated_input_tokens):
        return None
    cutoff = await select_cutoff(policy.retained_token_budget)
    return compaction_through_sequence(cutoff, context_summary=context_summary, messages=messages)


def messages_to_summarize(
    messages: Sequence[AgentMessage],
    previous_summary: ContextSummary | None,
    through_sequence: int,
) -> tuple[AgentMessage, ...]:
    """Return ``ContextSummaryRequest.messages``: after the previous summary, through the cutoff.

    Example:
        >>> [m.sequence for m in messages_to_summarize(messages, None, 2)]
        [1, 2]
    """
    after = 0 if previous_summary is None else previous_summary.last_sequence
    return tuple(message for message in messages if after < message.sequence <= through_sequence)


def next_context_summary(
    previous: ContextSummary | None,
    *,
    text: str,
    through_sequence: int,
    created_at: datetime | None,
) -> ContextSummary:
    """Return the ``ContextSummary`` that ``CompactContext`` stores: the next generation, from 1.

    Raises:
        ConfigurationError: When ``through_sequence`` is not past the previous summary.

    Example:
        >>> next_context_summary(None, text="...", through_sequence=12, created_at=None).generation
        1
    """
    if previous is not None and through_sequence <= previous.last_sequence:
        raise ConfigurationError(
            f"a new summary must reach past sequence {previous.last_sequence}, "
            f"got through_sequence {through_sequence}"
        )
    return ContextSummary(
        generation=1 if previous is None else previous.generation + 1,
        first_sequence=1,
        last_sequence=through_sequence,
        text=text,
        created_at=created_at,
    )


def build_context_summary_note(summary: ContextSummary) -> str:
    """Return the text that puts ``summary`` before the messages after it in a model input.

    Example:
        >>> from dex_agents import ContextSummary
        >>> print(build_context_summary_note(ContextSummary(1, 1, 12, "The user wants a refund.")))
        [Dex] Summary of the earlier conversation:
        The user wants a refund.
    """
    return f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{summary.text}"


def build_context_summary_omission_note(omitted_count: int) -> str:
    """Return the note that says how many of the oldest messages a summary request left out.

    Raises:
        ConfigurationError: When ``omitted_count`` is not a positive int.

    Example:
        >>> build_context_summary_omission_note(3)
        '[Dex] 3 earlier messages did not fit in this request and are left out.'
    """
    if isinstance(omitted_count, bool) or not isinstance(omitted_count, int) or omitted_count < 1:
        raise ConfigurationError(f"omitted_count must be a positive int, got {omitted_count!r}")
    return f"[Dex] {omitted_count} earlier messages did not fit in this request and are left out."


def estimate_text_tokens(text: str) -> int:
    """Estimate the tokens of ``text``: three UTF-8 bytes per token, rounded up.

    It errs high for English text, so a session compacts early rather than overflowing.

    Example:
        >>> estimate_text_tokens("hello"), estimate_text_tokens("")
        (2, 0)
    """
    return -(-len(text.encode("utf-8")) // _BYTES_PER_TOKEN)


def estimate_stored_input_tokens(turn: AgentTurnContext, *, fixed_input_tokens: int = 0) -> int:
    """Estimate a model input from the stored messages, for adapters that cannot measure it.

    Counts each stored ``framework_item`` with :func:`estimate_text_tokens`, the summary note when
    the turn has a summary, and ``fixed_input_tokens`` for what the adapter adds itself, such as
    its instructions and tool definitions.

    Raises:
        ConfigurationError: When ``fixed_input_tokens`` is not a non-negative int.

    Example:
        >>> estimate_stored_input_tokens(turn, fixed_input_tokens=500)
        534
    """
    _require_count("fixed_input_tokens", fixed_input_tokens)
    total = fixed_input_tokens + sum(_message_tokens(message) for message in turn.messages)
    if turn.context_summary is not None:
        total += estimate_text_tokens(build_context_summary_note(turn.context_summary))
    return total


def select_turn_boundary_cutoff(turn: AgentTurnContext, retained_token_budget: int) -> int | None:
    """Return the last message to summarize, cutting only between turns, or ``None``.

    The cutoff is the last message of an earlier turn: the oldest such boundary whose later
    messages fit ``retained_token_budget`` (counted as in :func:`estimate_stored_input_tokens`),
    else the newest boundary, which keeps only the running turn. It never cuts inside the running
    turn, so every tool call stays with its result, and returns ``None`` while
    ``turn.framework_run_state`` is set, because a resumed call continues from that state, or when
    the messages hold no boundary.

    Raises:
        ConfigurationError: When ``retained_token_budget`` is not a non-negative int.

    Example:
        >>> select_turn_boundary_cutoff(turn, retained_token_budget=1_000)
        2
    """
    _require_count("retained_token_budget", retained_token_budget)
    if turn.framework_run_state is not None:
        return None
    messages = turn.messages
    boundaries = [
        position
        for position in range(len(messages) - 1)
        if messages[position].turn_id != turn.turn_id
        and messages[position].turn_id != messages[position + 1].turn_id
    ]
    if not boundaries:
        return None
    retained = sum(_message_tokens(message) for message in messages)
    position_tokens = [_message_tokens(message) for message in messages]
    consumed = 0
    cursor = 0
    for boundary in boundaries:
        while cursor <= boundary:
            consumed += position_tokens[cursor]
            cursor += 1
        if retained - consumed <= retained_token_budget:
            return messages[boundary].sequence
    return messages[boundaries[-1]].sequence


def build_context_summary_prompt(
    request: ContextSummaryRequest, *, reserved_tokens: int = 0
) -> str:
    """Write the previous summary and the messages to summarize as one plain text prompt.

    The prompt starts with :data:`CONTEXT_SUMMARY_TRANSCRIPT_HEADER`, then the previous summary
    under :data:`CONTEXT_SUMMARY_NOTE_HEADER`, then one entry per message, oldest first. It fits
    ``request.input_token_budget`` together with :data:`CONTEXT_SUMMARY_INSTRUCTIONS` and
    ``reserved_tokens`` (such as the call's maximum output tokens), counted with
    :func:`estimate_text_tokens`: the oldest messages are left out first, with
    :func:`build_context_summary_omission_note` in their place; when not even the newest message
    fits, its text is cut, and then the previous summary's.

    Raises:
        ConfigurationError: When ``reserved_tokens`` is negative, or the budget cannot hold even the
            headers and the omission note.

    Example:
        >>> request = ContextSummaryRequest("session-42", "turn-2", 1, None, messages, 4_000)
        >>> prompt = build_context_summary_prompt(request)
        >>> prompt.startswith(CONTEXT_SUMMARY_TRANSCRIPT_HEADER), "Close the older one" in prompt
        (True, True)
    """
    _require_count("reserved_tokens", reserved_tokens)
    available_tokens = (
        request.input_token_budget
        - reserved_tokens
        - estimate_text_tokens(CONTEXT_SUMMARY_INSTRUCTIONS)
    )
    allowed_bytes = available_tokens * _BYTES_PER_TOKEN
    entries = [_render_message(message) for message in request.messages]
    previous = request.previous_summary.text if request.previous_summary is not None else None
    prompt = _fit_prompt(previous, entries, allowed_bytes)
    if prompt is None:
        raise ConfigurationError(
            f"input_token_budget {request.input_token_budget} leaves {available_tokens} tokens "
            "for the summary prompt after the instructions and reserved tokens, too few for its "
            "headers"
        )
    return prompt


def _fit_prompt(previous: str | None, entries: list[str], allowed_bytes: int) -> str | None:
    """The fullest prompt within ``allowed_bytes``: newest entries whole, then cut texts."""
    count = len(entries)
    head = _head_sections(previous)
    head_bytes = _utf8_size(_SECTION_SEPARATOR.join(head))
    kept_bytes = 0
    best: int | None = None
    # Keep the most newest entries whole that fit with the omission note. No early stop: the
    # note disappears once nothing is left out, so keeping all can fit where all but one did not.
    for start in range(count - 1, -1, -1):
        kept_bytes += _section_bytes(entries[start])
        if head_bytes + _sections_bytes(_omission_sections(start)) + kept_bytes <= allowed_bytes:
            best = start
    if best is not None:
        return _join(head, _omission_sections(best), entries[best:])
    if count:
        # Not even the newest entry fits whole: keep as much of its start as fits.
        note = _omission_sections(count - 1)
        room = allowed_bytes - head_bytes - _sections_bytes(note)
        if room > _section_bytes(_TRUNCATION_MARKER):
            newest = _truncate(entries[-1], room - _utf8_size(_SECTION_SEPARATOR))
            return _join(head, note, [newest])
    note = _omission_sections(count)
    if head_bytes + _sections_bytes(note) <= allowed_bytes:
        return _join(head, note, [])
    if previous is None:
        return None
    # The previous summary alone is too large: keep its start.
    room = (
        allowed_bytes
        - _utf8_size(_SECTION_SEPARATOR.join(_head_sections("")))
        - _sections_bytes(note)
    )
    if room <= _utf8_size(_TRUNCATION_MARKER):
        return None
    return _join(_head_sections(_truncate(previous, room)), note, [])


def _head_sections(previous: str | None) -> list[str]:
    sections = [CONTEXT_SUMMARY_TRANSCRIPT_HEADER]
    if previous is not None:
        sections.append(f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{previous}")
    return sections


def _omission_sections(omitted_count: int) -> list[str]:
    return [build_context_summary_omission_note(omitted_count)] if omitted_count else []


def _join(head: list[str], note: list[str], entries: list[str]) -> str:
    return _SECTION_SEPARATOR.join([*head, *note, *entries])


def _sections_bytes(sections: list[str]) -> int:
    return sum(_section_bytes(section) for section in sections)


def _section_bytes(section: str) -> int:
    """Bytes a section adds after an earlier one, separator included."""
    return _utf8_size(_SECTION_SEPARATOR) + _utf8_size(section)


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def _truncate(text: str, max_bytes: int) -> str:
    """Keep the start of ``text`` and the marker within ``max_bytes`` UTF-8 bytes."""
    if _utf8_size(text) <= max_bytes:
        return text
    budget = max_bytes - _utf8_size(_TRUNCATION_MARKER)
    # "ignore" drops a character cut in half, so the result stays within the budget.
    kept = text.encode("utf-8")[: max(budget, 0)].decode("utf-8", errors="ignore")
    return kept + _TRUNCATION_MARKER


def _render_message(message: AgentMessage) -> str:
    """One transcript entry from the message's plain projections, not its framework item."""
    lines = [f"[{message.role.value} #{message.sequence}]"]
    if message.text:
        lines.append(message.text)
    tool = f"{message.tool_name or 'tool'} ({message.tool_call_id or 'no call ID'})"
    if message.tool_arguments is not None:
        lines.append(f"Tool call {tool} with arguments: {message.tool_arguments}")
    if message.tool_output is not None:
        lines.append(f"Result of {tool}: {message.tool_output}")
    if len(lines) == 1:
        # No projection (such as a reasoning item): the framework item is all there is.
        lines.append(message.framework_item)
    return "\n".join(lines)


def _message_tokens(message: AgentMessage) -> int:
    return estimate_text_tokens(message.framework_item)


def _require_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{name} must be a non-negative int, got {value!r}")
