"""One long session past a small context window, under every runner that compacts.

The guard runs in the default suite: ``ScenarioRunner.context_window_guard_turns`` turns (150, fewer
when a runner's turns are slow) past a 2,000-token window, with small storage settings (a window
of 16 stored messages in chunks of 8 and retention limit 60, or chunks of 4 and limit 20 for a
short guard of at most ``SHORT_GUARD_TURNS`` turns) so compaction and retention repeat several
times within those turns. The 2,000-turn session with the default retention limit runs for every
runner, only with ``DEX_AGENTS_LONG_TESTS=1``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dex_agents.testing import ContextWindowProgress, ContextWindowSessionScenario
from dex_agents.testing.scenarios import load_scenario_runner
from scenario_support.runners import RUNNER_NAMES

LONG_TESTS = os.environ.get("DEX_AGENTS_LONG_TESTS") == "1"
GUARD_CONTEXT_WINDOW_TOKENS = 2_000
GUARD_RETAINED_MESSAGE_LIMIT = 60
SHORT_GUARD_TURNS = 50
SHORT_GUARD_RETAINED_MESSAGE_LIMIT = 20
"""The retention limit of a guard of at most ``SHORT_GUARD_TURNS`` turns (a runner whose turns are
slow): retention starts near turn 12 instead of 30, so it deletes at several points before the
guard ends. Not for the long guards: at 20, a tool turn's burst makes their state swing by more
than the bounded-state check allows."""
GUARD_MESSAGE_WINDOW_SIZE = 16
GUARD_MESSAGE_CHUNK_SIZE = 8
SHORT_GUARD_MESSAGE_CHUNK_SIZE = 4
"""The chunk size of a short guard: retention deletes a chunk of 4 (about every 2 turns) instead of 8
(about every 4), so the few turns still show several deletions."""
GUARD_SAMPLES = 10
"""The guard samples at least this many times, so a short guard still sees retention repeat."""


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
    short = turns <= SHORT_GUARD_TURNS
    retained_limit = SHORT_GUARD_RETAINED_MESSAGE_LIMIT if short else GUARD_RETAINED_MESSAGE_LIMIT
    chunk_size = SHORT_GUARD_MESSAGE_CHUNK_SIZE if short else GUARD_MESSAGE_CHUNK_SIZE
    scenario = ContextWindowSessionScenario(
        turns=turns,
        retained_message_limit=retained_limit,
        batch_turns=max(1, min(50, turns // GUARD_SAMPLES)),
        context_window_tokens=GUARD_CONTEXT_WINDOW_TOKENS,
        message_window_size=GUARD_MESSAGE_WINDOW_SIZE,
        message_chunk_size=chunk_size,
    )
    report = await scenario.run(factory, tmp_path, on_progress=_print_progress)
    report.check()
    # Retention kept the newest messages up to its limit and at most one chunk and the window more.
    limit = retained_limit + chunk_size + scenario.message_window_size
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
