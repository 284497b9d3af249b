"""The README's complete example and the example script run as written, and print what they say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPOSITORY_DIR = PACKAGE_DIR.parents[1]
README = PACKAGE_DIR / "README.md"
EXAMPLE = REPOSITORY_DIR / "examples" / "google-adk" / "support_agent.py"


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w*)\n(.*?)```", text, flags=re.DOTALL)


def test_the_readme_example_runs_as_written_twice(tmp_path: Path) -> None:
    text = README.read_text()
    section = text.split("## A complete example", 1)[1].split("\n## ", 1)[0]
    code = next(body for language, body in _blocks(section) if language == "python")
    expected = _blocks(section.split("It prints", 1)[1])[0][1]
    script = tmp_path / "support_agent.py"
    script.write_text(code)
    outputs = []
    for _ in range(2):
        result = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=240,
            env={**os.environ, "PYTHONPATH": ""},
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stderr == ""  # no stray warnings: the README shows the whole output
        outputs.append(result.stdout)
    assert outputs[0] == expected
    # The second run continues the session in the same database.
    assert outputs[1] == expected.replace("turn-1", "turn-2")


def test_the_example_script_prints_the_turns_events_and_messages() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=REPOSITORY_DIR,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == ""  # no stray warnings
    out = result.stdout
    events = out.split("Stored messages:")[0]
    for event_type in (
        "turn_started",
        "tool_call_deferred",
        "tool_call_finished",
        "turn_completed",
    ):
        assert event_type in events
    assert events.count("text_delta") > 1  # the answer streamed
    assert "1. user      Hi! Where is my order 7?" in out
    assert '3. tool      {"item":"a ceramic teapot","status":"delivered"}' in out
    assert "4. assistant Order 7 (a ceramic teapot) was delivered." in out
    assert '"functionCall"' in out  # framework_item is ADK's own event JSON
