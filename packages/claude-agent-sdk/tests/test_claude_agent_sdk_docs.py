"""The README's example is the example script, and the script runs as a user would run it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]
README = REPOSITORY / "packages" / "claude-agent-sdk" / "README.md"
EXAMPLE = REPOSITORY / "examples" / "claude-agent-sdk" / "refund_agent.py"


def test_the_readme_example_is_the_example_script() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert blocks and blocks[0] == EXAMPLE.read_text()


def test_the_example_runs_one_approved_turn_and_prints_its_events(tmp_path: Path) -> None:
    outputs = []
    for _ in range(2):  # the second run continues the session in the same database
        finished = subprocess.run(
            [sys.executable, str(EXAMPLE)],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=tmp_path,
        )
        assert finished.returncode == 0, finished.stderr[-3000:]
        outputs.append(finished.stdout)
    for turn, out in zip(("turn-1", "turn-2"), outputs, strict=True):
        assert "approval asked for refund_order" in out
        events = out.split("events:\n", 1)[1].split(f"\n{turn} ", 1)[0]
        for event in ("turn_started", "tool_call_deferred", "interrupt_raised", "turn_completed"):
            assert event in events
        assert f"{turn} completed Done: refunded 4200 (key session-1/{turn}/" in out
        assert out.rstrip().endswith("  refund_order: succeeded")
