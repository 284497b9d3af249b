"""One long session past a small context window, under every runner that compacts.

The 800-turn guard (retention limit 100) runs in the default suite; the 2,000-turn session with the
default retention limit runs only with ``DEX_AGENTS_LONG_TESTS=1``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dex_agents.testing import ContextWindowProgress, ContextWindowSessionScenario
from dex_agents.testing.scenarios import load_scenario_runner
from scenario_support.runners import RUNNER_NAMES

LONG_TESTS = os.environ.get("DEX_AGENTS_LONG_TESTS") == "1"


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
async def test_800_turn_guard_stays_under_the_window_with_bounded_state(
    runner: str, tmp_path: Path
) -> None:
    scenario = ContextWindowSessionScenario(turns=800, retained_message_limit=100)
    report = await scenario.run(_factory(runner), tmp_path, on_progress=_print_progress)
    report.check()
    # Retention kept the newest 100 messages and at most one chunk and the window more.
    assert all(p.kept_messages <= 100 + 32 + 64 for p in report.progress)


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
