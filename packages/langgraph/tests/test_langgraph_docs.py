"""The README's complete example and the example script run as written and print what they say."""

from __future__ import annotations

from pathlib import Path

from dex_agents.testing import printed_section, readme_example_lines, run_example_script

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPOSITORY_DIR = PACKAGE_DIR.parents[1]


def test_the_readme_example_runs_as_written(tmp_path: Path) -> None:
    runs = readme_example_lines(PACKAGE_DIR / "README.md", tmp_path, "A complete example")

    # Twice: the second run continues the session in the same database.
    for turn, lines in zip(("turn-1", "turn-2"), runs, strict=True):
        assert lines == [
            'waiting for approval of refund_order {"order_id":"7"}',
            "Order 7 is refunded.",
            f"refund keys: ['session-1/{turn}/r1']",
        ]


def test_the_example_prints_the_turns_events_and_stored_messages() -> None:
    output = run_example_script(REPOSITORY_DIR / "examples" / "langgraph" / "order_agent.py").stdout

    events = [line.split()[0] for line in printed_section(output, "AgentEvents:")]
    assert events[0] == "turn_started" and events[-1] == "turn_completed"
    assert events.index("tool_call_deferred") < events.index("tool_call_started")
    assert events.index("tool_call_finished") < events.index("text_delta")
    assert printed_section(output, "Stored messages:") == [
        "  1 user: Where is order 7?",
        "  2 assistant: calls lookup_order",
        "  3 tool: Order 7: 2 items, shipped yesterday.",
        "  4 assistant: Order 7 has 2 items and shipped yesterday.",
    ]
