"""The README programs on LocalRuntime run as written, twice, in a fresh directory.

The repository README's "Running an agent" program, the core README's ``## Example`` (the one the
release check runs from the installed wheel) and the core README's "Running an agent" blocks
(one script): each runs as a child process with only the embedded engine it starts itself, and a
second run continues the same session in the same database.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dex_agents.testing import readme_python_blocks, run_readme_example

CORE_DIR = Path(__file__).resolve().parents[1]
REPOSITORY_DIR = CORE_DIR.parents[1]


def _run_twice(source: str, directory: Path) -> tuple[str, str]:
    first, second = run_readme_example(source, directory, file_name="agent.py", isolated=True)
    assert not (directory / ".dex-agents" / "engine.address.json").exists()
    return first.stdout, second.stdout


def test_the_repository_readme_program(tmp_path: Path) -> None:
    program = readme_python_blocks(REPOSITORY_DIR / "README.md", "Running an agent")[0]
    first, second = _run_twice(program, tmp_path)
    assert first.splitlines() == [
        'turn-1 completed Order 7: {"order_id": "7", "status": "delivered"}',
        "  lookup_order: succeeded",
    ]
    assert second.splitlines()[0].startswith("turn-2 completed Order 7:")


def test_the_core_readme_example(tmp_path: Path) -> None:
    (program,) = readme_python_blocks(CORE_DIR / "README.md", "Example")[:1]
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
    blocks = readme_python_blocks(CORE_DIR / "README.md", "Running an agent")[:2]
    first, second = _run_twice("\n\n".join(blocks), tmp_path)
    assert first == second == 'completed Order 7: {"status": "delivered"}\n'


@pytest.mark.parametrize("heading", ["Running an agent", "Deploying"])
def test_the_repository_readme_fragments_compile(heading: str) -> None:
    readme = REPOSITORY_DIR / "README.md"
    for block in readme_python_blocks(readme, heading, include_untested=True):
        compile(block, heading, "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT
