"""The README's example is the example script, and the script runs as a user would run it."""

from __future__ import annotations

from pathlib import Path

from dex_agents.testing import readme_python_blocks, run_example_script

REPOSITORY = Path(__file__).resolve().parents[3]
README = REPOSITORY / "packages" / "claude-agent-sdk" / "README.md"
EXAMPLE = REPOSITORY / "examples" / "claude-agent-sdk" / "refund_agent.py"


def test_the_readme_example_is_the_example_script() -> None:
    blocks = readme_python_blocks(README)
    assert blocks and blocks[0] == EXAMPLE.read_text()


def test_the_example_runs_one_approved_turn_and_prints_its_events(tmp_path: Path) -> None:
    # The second run continues the session in the same database.
    outputs = [run_example_script(EXAMPLE, cwd=tmp_path).stdout for _ in range(2)]
    for turn, out in zip(("turn-1", "turn-2"), outputs, strict=True):
        assert "approval asked for refund_order" in out
        events = out.split("events:\n", 1)[1].split(f"\n{turn} ", 1)[0]
        for event in ("turn_started", "tool_call_deferred", "interrupt_raised", "turn_completed"):
            assert event in events
        assert f"{turn} completed Done: refunded 4200 (key session-1/{turn}/" in out
        assert out.rstrip().endswith("  refund_order: succeeded")
