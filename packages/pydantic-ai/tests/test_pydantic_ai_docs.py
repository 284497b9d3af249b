"""The README's example and the example script run as written and show a durable turn."""

from __future__ import annotations

from pathlib import Path

from dex_agents.testing import check_readme_example_output, printed_section, run_example_script

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPOSITORY_DIR = PACKAGE_DIR.parents[1]


def test_the_readme_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    # Two runs, as the README shows two outputs: the second continues the session in the same
    # database, where TestModel, seeing the tool's result, answers without calling it again. The
    # MCP recipe is `notest`.
    check_readme_example_output(PACKAGE_DIR / "README.md", tmp_path)


def test_the_example_script_prints_the_turns_events_and_messages() -> None:
    script = REPOSITORY_DIR / "examples" / "pydantic-ai" / "order_agent.py"
    output = run_example_script(script).stdout

    events = [line.split()[0] for line in printed_section(output, "AgentEvents:")]
    for event in (
        "turn_started",
        "tool_call_deferred",
        "tool_call_finished",
        "text_delta",
        "turn_completed",
    ):
        assert event in events
    assert "idempotency key order-session/turn-1/" in output
    assert output.rstrip().endswith("assistant: Order 7 has shipped.")
