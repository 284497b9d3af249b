"""The README's complete example and the example script run as written, and print what they say."""

from __future__ import annotations

import os
from pathlib import Path

from dex_agents.testing import check_readme_example_output, printed_section, run_example_script

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPOSITORY_DIR = PACKAGE_DIR.parents[1]
README = PACKAGE_DIR / "README.md"
EXAMPLE = REPOSITORY_DIR / "examples" / "google-adk" / "support_agent.py"


def test_the_readme_example_runs_twice_and_prints_what_the_readme_shows(tmp_path: Path) -> None:
    # No stray warnings (a run that writes to stderr fails): the README shows the whole output.
    # The second run continues the session in the same database.
    check_readme_example_output(
        README,
        tmp_path,
        "A complete example",
        file_name="support_agent.py",
        env={**os.environ, "PYTHONPATH": ""},
    )


def test_the_example_script_prints_the_turns_events_and_messages() -> None:
    result = run_example_script(EXAMPLE, cwd=REPOSITORY_DIR)
    assert result.stderr == ""  # no stray warnings
    out = result.stdout
    events = [line.split()[0] for line in printed_section(out, "AgentEvents of the turn:")]
    assert events[0] == "turn_started" and events[-1] == "turn_completed"
    assert events.index("tool_call_deferred") < events.index("tool_call_finished")
    # The answer streamed, after the tool's result.
    assert events.index("tool_call_finished") < events.index("text_delta")
    assert events.count("text_delta") > 1
    assert "1. user      Hi! Where is my order 7?" in out
    assert '3. tool      {"item":"a ceramic teapot","status":"delivered"}' in out
    assert "4. assistant Order 7 (a ceramic teapot) was delivered." in out
    assert '"functionCall"' in out  # framework_item is ADK's own event JSON
