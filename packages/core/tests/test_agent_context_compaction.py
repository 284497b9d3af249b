"""Compaction rules: the policy, the trigger and no-loop rule, and the shared adapter helpers."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
    CONTEXT_SUMMARY_TRANSCRIPT_HEADER,
    AgentEventWriter,
    AgentMessage,
    AgentTurnContext,
    CompactionPolicy,
    ConfigurationError,
    ContextSummary,
    ContextSummaryRequest,
    MessageRole,
    RunnerContractError,
    build_context_summary_omission_note,
    build_context_summary_prompt,
    estimate_stored_input_tokens,
    estimate_text_tokens,
    select_turn_boundary_cutoff,
)
from dex_agents._compaction import (
    build_context_summary_note,
    compaction_through_sequence,
    decide_compaction,
    messages_to_summarize,
    next_context_summary,
)


def stored(
    sequence: int,
    turn: int,
    item: str = "x" * 30,
    *,
    role: str = "user",
    text: str | None = None,
    tool_call_id: str | None = None,
    tool_name: str | None = None,
    tool_arguments: str | None = None,
    tool_output: str | None = None,
) -> AgentMessage:
    return AgentMessage(
        sequence,
        MessageRole(role),
        framework_item=item,
        text=text,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        tool_arguments=tool_arguments,
        tool_output=tool_output,
        turn_id=f"turn-{turn}",
    )


def turn_context(
    messages: list[AgentMessage],
    *,
    turn: int,
    run_state: str | None = None,
    summary: ContextSummary | None = None,
) -> AgentTurnContext:
    return AgentTurnContext(
        flow_id="session-1",
        turn_id=f"turn-{turn}",
        attempt=1,
        messages=tuple(messages),
        framework_run_state=run_state,
        tool_calls={},
        events=AgentEventWriter.discarding(),
        context_summary=summary,
    )


def three_turns() -> list[AgentMessage]:
    """Turns 1 and 2 complete (4 messages each, 10 tokens apiece), turn 3 running."""
    return [stored(sequence, (sequence - 1) // 4 + 1) for sequence in range(1, 10)]


def summary_through(last: int, generation: int = 1) -> ContextSummary:
    return ContextSummary(generation, 1, last, "The user wants a refund for order 7.")


def test_policy_defaults_validation_and_budget() -> None:
    policy = CompactionPolicy(context_window_tokens=400_000)
    assert (policy.trigger_ratio, policy.keep_ratio, policy.reserved_input_tokens) == (0.85, 0.3, 0)
    assert policy.retained_token_budget == 120_000
    with pytest.raises(ConfigurationError, match="context_window_tokens must be a positive int"):
        CompactionPolicy(context_window_tokens=0)
    with pytest.raises(ConfigurationError, match="trigger_ratio must be above 0 and at most 1"):
        CompactionPolicy(1000, trigger_ratio=1.5)
    with pytest.raises(ConfigurationError, match="keep_ratio must be above 0"):
        CompactionPolicy(1000, keep_ratio=0)
    with pytest.raises(ConfigurationError, match=r"keep_ratio \(0.9\) must be below trigger_ratio"):
        CompactionPolicy(1000, keep_ratio=0.9)
    with pytest.raises(
        ConfigurationError, match="reserved_input_tokens must be a non-negative int"
    ):
        CompactionPolicy(1000, reserved_input_tokens=-1)
    with pytest.raises(ConfigurationError, match="must be below context_window_tokens"):
        CompactionPolicy(1000, reserved_input_tokens=1000)


def test_trigger_counts_reserved_tokens_at_the_ratio() -> None:
    policy = CompactionPolicy(1000)
    assert not policy.is_triggered(849)
    assert policy.is_triggered(850)
    reserved = CompactionPolicy(1000, reserved_input_tokens=100)
    assert not reserved.is_triggered(749)
    assert reserved.is_triggered(750)
    with pytest.raises(
        ConfigurationError, match="estimate_input_tokens must be a non-negative int"
    ):
        policy.is_triggered(-1)


async def test_a_cutoff_not_past_the_summary_never_compacts_so_the_pair_cannot_loop() -> None:
    messages = three_turns()
    policy = CompactionPolicy(100)
    asked: list[int] = []

    async def select(budget: int) -> int | None:
        asked.append(budget)
        return 8

    decided = await decide_compaction(
        policy,
        estimated_input_tokens=90,
        select_cutoff=select,
        context_summary=None,
        messages=messages,
    )
    assert decided == 8 and asked == [30]
    summary = next_context_summary(None, text="s", through_sequence=8, created_at=None)
    # The estimate after compacting is still high, and the runner can cut no later: no compaction.
    after = [m for m in messages if m.sequence > 8]
    again = await decide_compaction(
        policy,
        estimated_input_tokens=99,
        select_cutoff=select,
        context_summary=summary,
        messages=after,
    )
    assert again is None
    assert compaction_through_sequence(None, context_summary=None, messages=messages) is None
    after_seven = [m for m in messages if m.sequence > 7]
    assert (
        compaction_through_sequence(8, context_summary=summary_through(7), messages=after_seven)
        == 8
    )


async def test_no_cutoff_is_asked_below_the_trigger_and_a_bad_cutoff_is_a_clear_error() -> None:
    async def never(budget: int) -> int | None:
        raise AssertionError("select_cutoff must not be called below the trigger")

    assert (
        await decide_compaction(
            CompactionPolicy(100),
            estimated_input_tokens=84,
            select_cutoff=never,
            context_summary=None,
            messages=three_turns(),
        )
        is None
    )
    with pytest.raises(RunnerContractError, match=r"returned 42, which is not .* \(1\.\.9\)"):
        compaction_through_sequence(42, context_summary=None, messages=three_turns())
    with pytest.raises(RunnerContractError, match="must return an int or None"):
        compaction_through_sequence("3", context_summary=None, messages=three_turns())  # type: ignore[arg-type]


def test_summaries_count_generations_and_select_their_messages() -> None:
    first = next_context_summary(None, text="a", through_sequence=4, created_at=None)
    assert (first.generation, first.first_sequence, first.last_sequence) == (1, 1, 4)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    second = next_context_summary(first, text="b", through_sequence=8, created_at=now)
    assert (second.generation, second.first_sequence, second.created_at) == (2, 1, now)
    with pytest.raises(ConfigurationError, match="past sequence 8"):
        next_context_summary(second, text="c", through_sequence=8, created_at=None)
    picked = messages_to_summarize(three_turns(), first, 8)
    assert [m.sequence for m in picked] == [5, 6, 7, 8]


def test_token_estimates_use_three_utf8_bytes_per_token_rounding_up() -> None:
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens("abc") == 1
    assert estimate_text_tokens("abcd") == 2
    assert estimate_text_tokens("é") == 1  # two bytes
    assert estimate_text_tokens("日本") == 2  # six bytes
    turn = turn_context(three_turns(), turn=3)
    assert estimate_stored_input_tokens(turn) == 9 * 10
    assert estimate_stored_input_tokens(turn, fixed_input_tokens=500) == 590
    summary = summary_through(4)
    with_summary = turn_context(three_turns()[4:], turn=3, summary=summary)
    note_tokens = estimate_text_tokens(build_context_summary_note(summary))
    assert estimate_stored_input_tokens(with_summary) == 5 * 10 + note_tokens
    with pytest.raises(ConfigurationError, match="fixed_input_tokens"):
        estimate_stored_input_tokens(turn, fixed_input_tokens=-5)


def test_turn_boundary_cutoff_keeps_what_fits_and_never_cuts_the_running_turn() -> None:
    turn = turn_context(three_turns(), turn=3)
    # Turn 3 (one message, 10 tokens) is running; the boundaries are after 4 and after 8.
    assert select_turn_boundary_cutoff(turn, retained_token_budget=50) == 4
    assert select_turn_boundary_cutoff(turn, retained_token_budget=49) == 8
    assert select_turn_boundary_cutoff(turn, retained_token_budget=10) == 8
    assert select_turn_boundary_cutoff(turn, retained_token_budget=0) == 8  # best effort
    assert select_turn_boundary_cutoff(turn, retained_token_budget=1_000) == 4


def test_turn_boundary_cutoff_is_none_with_run_state_or_without_an_earlier_turn() -> None:
    resumed = turn_context(three_turns(), turn=3, run_state='{"pending": true}')
    assert select_turn_boundary_cutoff(resumed, retained_token_budget=0) is None
    only_running = turn_context([stored(s, 5) for s in range(10, 20)], turn=5)
    assert select_turn_boundary_cutoff(only_running, retained_token_budget=0) is None
    with pytest.raises(ConfigurationError, match="retained_token_budget"):
        select_turn_boundary_cutoff(only_running, retained_token_budget=-1)


def test_turn_boundary_cutoff_never_separates_a_tool_call_from_its_result() -> None:
    rng = random.Random(11)
    messages: list[AgentMessage] = []
    for turn in range(1, 30):
        for _ in range(rng.randint(1, 6)):
            role = rng.choice(["user", "assistant", "tool"])
            messages.append(stored(len(messages) + 1, turn, "y" * rng.randint(0, 400), role=role))
    running = turn_context(messages, turn=29)
    for budget in range(0, 20_000, 37):
        cutoff = select_turn_boundary_cutoff(running, retained_token_budget=budget)
        assert cutoff is not None
        position = next(i for i, m in enumerate(messages) if m.sequence == cutoff)
        assert messages[position].turn_id != messages[position + 1].turn_id
        assert messages[position].turn_id != "turn-29"


def request(
    messages: list[AgentMessage],
    budget: int,
    previous: ContextSummary | None = None,
) -> ContextSummaryRequest:
    return ContextSummaryRequest(
        flow_id="session-1",
        turn_id="turn-9",
        attempt=1,
        previous_summary=previous,
        messages=tuple(messages),
        input_token_budget=budget,
    )


def prompt_tokens(prompt: str, reserved: int = 0) -> int:
    return (
        estimate_text_tokens(prompt) + estimate_text_tokens(CONTEXT_SUMMARY_INSTRUCTIONS) + reserved
    )


def transcript() -> list[AgentMessage]:
    return [
        stored(1, 1, text="Refund order 7, please.", role="user"),
        stored(
            2,
            1,
            role="assistant",
            tool_call_id="call-1",
            tool_name="refund",
            tool_arguments='{"order": 7}',
        ),
        stored(3, 1, role="tool", tool_call_id="call-1", tool_name="refund", tool_output="ok"),
        stored(4, 1, text="Order 7 is refunded.", role="assistant"),
        stored(5, 2, item='{"type":"reasoning","summary":"thinking"}', role="assistant"),
    ]


def test_summary_prompt_holds_the_previous_summary_and_every_message() -> None:
    previous = summary_through(0)
    prompt = build_context_summary_prompt(request(transcript(), 10_000, previous))
    assert prompt.startswith(CONTEXT_SUMMARY_TRANSCRIPT_HEADER)
    assert f"{CONTEXT_SUMMARY_NOTE_HEADER}\nThe user wants a refund for order 7." in prompt
    assert "[user #1]\nRefund order 7, please." in prompt
    assert 'Tool call refund (call-1) with arguments: {"order": 7}' in prompt
    assert "Result of refund (call-1): ok" in prompt
    assert '{"type":"reasoning","summary":"thinking"}' in prompt  # no projection: the item
    assert "did not fit" not in prompt
    assert prompt.index("#1]") < prompt.index("#4]") < prompt.index("#5]")


def test_summary_prompt_leaves_out_the_oldest_messages_to_fit_the_budget() -> None:
    messages = [stored(s, s, text=f"message {s} " + "z" * 300) for s in range(1, 41)]
    full = build_context_summary_prompt(request(messages, 100_000))
    budget = prompt_tokens(full) // 2
    reserved = 200
    prompt = build_context_summary_prompt(request(messages, budget), reserved_tokens=reserved)
    assert prompt_tokens(prompt, reserved) <= budget
    assert prompt.startswith(CONTEXT_SUMMARY_TRANSCRIPT_HEADER)
    kept = [s for s in range(1, 41) if f"#{s}]" in prompt]
    assert kept == list(range(kept[0], 41)) and kept[0] > 1
    assert build_context_summary_omission_note(kept[0] - 1) in prompt
    # The fit is tight: room for one more message keeps one more.
    roomier = build_context_summary_prompt(
        request(messages, budget + 120), reserved_tokens=reserved
    )
    assert sum(f"#{s}]" in roomier for s in range(1, 41)) > len(kept)


def test_summary_prompt_cuts_a_newest_message_or_summary_too_large_for_the_budget() -> None:
    huge = [stored(1, 1, text="start " + "w" * 30_000)]
    budget = estimate_text_tokens(CONTEXT_SUMMARY_INSTRUCTIONS) + 400
    prompt = build_context_summary_prompt(request(huge, budget))
    assert prompt_tokens(prompt) <= budget
    assert "[user #1]\nstart w" in prompt and "did not fit in this request." in prompt

    big_previous = ContextSummary(3, 1, 10, "p" * 30_000)
    prompt = build_context_summary_prompt(request(huge, budget, big_previous))
    assert prompt_tokens(prompt) <= budget
    assert prompt.startswith(CONTEXT_SUMMARY_TRANSCRIPT_HEADER)
    assert build_context_summary_omission_note(1) in prompt


@pytest.mark.parametrize("seed", range(6))
def test_summary_prompt_always_fits_random_budgets(seed: int) -> None:
    rng = random.Random(seed)
    messages = [
        stored(s, s, text="ü" * rng.randint(0, 2_000)) for s in range(1, rng.randint(1, 60))
    ]
    previous = summary_through(0) if rng.random() < 0.5 else None
    floor = estimate_text_tokens(CONTEXT_SUMMARY_INSTRUCTIONS) + 200
    for _ in range(30):
        budget = rng.randint(floor, floor + 40_000)
        reserved = rng.randint(0, 100)
        prompt = build_context_summary_prompt(
            request(messages, budget, previous), reserved_tokens=reserved
        )
        assert prompt_tokens(prompt, reserved) <= budget
        assert prompt.startswith(CONTEXT_SUMMARY_TRANSCRIPT_HEADER)


def test_summary_prompt_rejects_a_budget_too_small_for_its_headers() -> None:
    with pytest.raises(ConfigurationError, match="input_token_budget 10 leaves"):
        build_context_summary_prompt(request(transcript(), 10))
    with pytest.raises(ConfigurationError, match="reserved_tokens"):
        build_context_summary_prompt(request(transcript(), 10_000), reserved_tokens=-1)


def test_fixed_texts() -> None:
    assert CONTEXT_SUMMARY_NOTE_HEADER == "[Dex] Summary of the earlier conversation:"
    assert (
        build_context_summary_omission_note(12)
        == "[Dex] 12 earlier messages did not fit in this request and are left out."
    )
    with pytest.raises(ConfigurationError, match="omitted_count"):
        build_context_summary_omission_note(0)
    assert build_context_summary_note(summary_through(3)) == (
        "[Dex] Summary of the earlier conversation:\nThe user wants a refund for order 7."
    )
