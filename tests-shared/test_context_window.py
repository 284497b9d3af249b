"""One long session past a small context window, under every runner that compacts.

The guard runs in the default suite: ``ScenarioRunner.context_window_guard_turns`` turns (60, fewer
when a runner's turns are slow) past a small window, with small storage settings, so compaction and
retention repeat several times within those turns (``LONG_GUARD`` and ``SHORT_GUARD``). The
2,000-turn session with the default retention limit runs for every runner, only with
``DEX_AGENTS_LONG_TESTS=1``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from dex_agents.testing import ContextWindowProgress, ContextWindowSessionScenario
from dex_agents.testing.scenarios import load_scenario_runner
from scenario_support.runners import RUNNER_NAMES

LONG_TESTS = os.environ.get("DEX_AGENTS_LONG_TESTS") == "1"
SHORT_GUARD_TURNS = 50
GUARD_MESSAGE_WINDOW_SIZE = 16
GUARD_SAMPLES = 10
"""The guard samples at least this many times, so a short guard still sees retention repeat."""


@dataclass(frozen=True)
class _GuardSettings:
    context_window_tokens: int
    tool_turn_every: int
    retained_message_limit: int
    message_chunk_size: int


LONG_GUARD = _GuardSettings(
    context_window_tokens=1_400,
    tool_turn_every=4,
    retained_message_limit=60,
    message_chunk_size=8,
)
"""A guard of more than ``SHORT_GUARD_TURNS`` turns. In 60 turns it calls the tool in 15 turns, as
the 150-turn guard with a tool turn every tenth turn did, every runner compacts at least 5 times
(the largest model input, LangGraph's, is 1,295 tokens) and retention deletes at 7 points."""
SHORT_GUARD = _GuardSettings(
    context_window_tokens=2_000,
    tool_turn_every=10,
    retained_message_limit=20,
    message_chunk_size=4,
)
"""A guard of at most ``SHORT_GUARD_TURNS`` turns (a runner whose turns are slow; each tool turn adds
model calls, so it keeps a tool turn every tenth turn). Retention keeps 20 messages and deletes a
chunk of 4 (about every 2 turns), so it starts near turn 12 and deletes several times before the
guard ends. Not for the long guards: at 20, a tool turn's burst makes their state swing by more
than the bounded-state check allows."""


def _factory(runner: str):  # type: ignore[no-untyped-def]
    factory = load_scenario_runner(runner).build_context_window_flow
    if factory is None:
        pytest.skip(f"runner {runner} does not implement ContextCompactionRunner")
    return factory


def _print_progress(progress: ContextWindowProgress) -> None:
    print(
        f"turns={progress.turns} elapsed={progress.elapsed_seconds:.1f}s "
        f"state_bytes={progress.state_bytes} kept_messages={progress.kept_messages} "
        f"summaries={progress.summary_generation}"
    )


@pytest.mark.parametrize("runner", RUNNER_NAMES)
async def test_guard_session_stays_under_the_window_with_bounded_state(
    runner: str, tmp_path: Path
) -> None:
    factory = _factory(runner)
    turns = load_scenario_runner(runner).context_window_guard_turns
    guard = SHORT_GUARD if turns <= SHORT_GUARD_TURNS else LONG_GUARD
    scenario = ContextWindowSessionScenario(
        turns=turns,
        retained_message_limit=guard.retained_message_limit,
        batch_turns=max(1, min(50, turns // GUARD_SAMPLES)),
        context_window_tokens=guard.context_window_tokens,
        message_window_size=GUARD_MESSAGE_WINDOW_SIZE,
        message_chunk_size=guard.message_chunk_size,
        tool_turn_every=guard.tool_turn_every,
    )
    report = await scenario.run(factory, tmp_path, on_progress=_print_progress)
    report.check()
    # Retention kept the newest messages up to its limit and at most one chunk and the window more.
    limit = guard.retained_message_limit + guard.message_chunk_size + GUARD_MESSAGE_WINDOW_SIZE
    assert all(p.kept_messages <= limit for p in report.progress)


@pytest.mark.skipif(
    not LONG_TESTS, reason="set DEX_AGENTS_LONG_TESTS=1 to run the 2,000-turn session"
)
@pytest.mark.parametrize("runner", RUNNER_NAMES)
async def test_2000_turn_session_with_compaction(runner: str, tmp_path: Path) -> None:
    scenario = ContextWindowSessionScenario(
        turns=2_000, retained_message_limit=1_000, batch_turns=100, turn_timeout_seconds=5.0
    )
    report = await scenario.run(_factory(runner), tmp_path, on_progress=_print_progress)
    report.check()
