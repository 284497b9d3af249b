"""The README programs on LocalRuntime run as written, twice, in a fresh directory.

The repository README's "Running an agent" program, the core README's ``## Example`` (the one the
release check runs from the installed wheel) and the core README's "Running an agent" blocks
(one script): each runs as a child process with only the embedded engine it starts itself, and a
second run continues the same session in the same database.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

CORE_DIR = Path(__file__).resolve().parents[1]
REPOSITORY_DIR = CORE_DIR.parents[1]
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _section(readme: Path, heading: str) -> str:
    text = readme.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _blocks(readme: Path, heading: str) -> list[str]:
    return _PYTHON_BLOCK.findall(_section(readme, heading))


def _run_twice(source: str, directory: Path) -> tuple[str, str]:
    script = directory / "agent.py"
    script.write_text(source)
    outputs = []
    for _ in range(2):
        finished = subprocess.run(
            [sys.executable, "-I", script.name],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert finished.returncode == 0, finished.stderr
        outputs.append(finished.stdout)
    assert not (directory / ".dex-agents" / "engine.address.json").exists()
    return outputs[0], outputs[1]


def test_the_repository_readme_program(tmp_path: Path) -> None:
    program = _blocks(REPOSITORY_DIR / "README.md", "Running an agent")[0]
    first, second = _run_twice(program, tmp_path)
    assert first.splitlines() == [
        'turn-1 completed Order 7: {"order_id": "7", "status": "delivered"}',
        "  lookup_order: succeeded",
    ]
    assert second.splitlines()[0].startswith("turn-2 completed Order 7:")


def test_the_core_readme_example(tmp_path: Path) -> None:
    (program,) = _blocks(CORE_DIR / "README.md", "Example")[:1]
    first, second = _run_twice(program, tmp_path)
    lines = first.splitlines()
    assert lines[0] == 'approving refund_order {"order_id":"7"}'
    assert re.fullmatch(
        r"turn-1 completed Done: refunded order 7 \(idempotency key refund-7/turn-1/\S+\)",
        lines[1],
    )
    assert lines[2:] == ["  lookup_order: succeeded", "  refund_order: succeeded"]
    assert "turn-2 completed Done: refunded order 7" in second


def test_the_core_readme_running_an_agent_blocks(tmp_path: Path) -> None:
    blocks = _blocks(CORE_DIR / "README.md", "Running an agent")[:2]
    first, second = _run_twice("\n\n".join(blocks), tmp_path)
    assert first == second == 'completed Order 7: {"status": "delivered"}\n'


@pytest.mark.parametrize("heading", ["Running an agent", "Deploying"])
def test_the_repository_readme_fragments_compile(heading: str) -> None:
    for block in _PYTHON_BLOCK.findall(
        _section(REPOSITORY_DIR / "README.md", heading).replace("```python notest", "```python")
    ):
        compile(block, heading, "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT
