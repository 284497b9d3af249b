"""The README's example and the example script run as written and show a durable turn."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPOSITORY_DIR = PACKAGE_DIR.parents[1]
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _run(script: Path) -> str:
    completed = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=script.parent,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_the_readme_example_runs_twice_as_written(tmp_path: Path) -> None:
    readme = (PACKAGE_DIR / "README.md").read_text()
    (example,) = _PYTHON_BLOCK.findall(readme)  # the other blocks are marked `python notest`
    script = tmp_path / "readme_example.py"
    script.write_text(example)

    assert _run(script).splitlines() == [
        "turn-1 completed Order 7 has shipped.",
        "  lookup_order: succeeded -> shipped (session-1/turn-1/lookup-1)",
    ]
    # The second run continues the session in the same database; the model reads the stored
    # result of turn 1 and calls no tool.
    assert _run(script).splitlines() == ["turn-2 completed Order 7 has shipped."]


def test_the_example_script_prints_the_turns_events_and_messages(tmp_path: Path) -> None:
    output = _run(REPOSITORY_DIR / "examples" / "strands" / "order_agent.py")

    events = output.split("Stored messages:")[0]
    for event in ("turn_started", "tool_call_deferred", "tool_call_finished", "text_delta"):
        assert event in events
    assert "idempotency key order-session/turn-1/lookup-1" in output
    assert output.rstrip().endswith("assistant: Order 7 has shipped.")
