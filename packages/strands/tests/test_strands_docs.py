"""The README's example and the example script run as written and show a durable turn."""

from __future__ import annotations

from pathlib import Path

from dex_agents.testing import check_readme_example_output, printed_section, run_example_script

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPOSITORY_DIR = PACKAGE_DIR.parents[1]


def test_the_readme_example_runs_twice_and_prints_what_the_readme_shows(tmp_path: Path) -> None:
    # The second run continues the session in the same database; the model reads the stored
    # result of turn 1 and calls no tool. The other blocks are `python notest`.
    check_readme_example_output(PACKAGE_DIR / "README.md", tmp_path)


def test_the_example_script_prints_the_turns_events_and_messages() -> None:
    output = run_example_script(REPOSITORY_DIR / "examples" / "strands" / "order_agent.py").stdout

    events = [line.split()[0] for line in printed_section(output, "AgentEvents:")]
    for event in ("turn_started", "tool_call_deferred", "tool_call_finished", "text_delta"):
        assert event in events
    assert "idempotency key order-session/turn-1/lookup-1" in output
    assert output.rstrip().endswith("assistant: Order 7 has shipped.")
