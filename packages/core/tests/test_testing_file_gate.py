from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from dex_agents import ConfigurationError
from dex_agents.testing import FileGate, WaitTimeoutError

_CHILD = """
import asyncio, sys
from dex_agents.testing import FileGate
gate = FileGate(sys.argv[1], sys.argv[2])
gate.mark_reached()
asyncio.run(gate.wait_for_release())
print("released")
"""


def _start_child_at_gate(state_dir: Path, name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(state_dir), name],
        stdout=subprocess.PIPE,
        text=True,
    )


async def test_a_child_process_waits_at_the_gate_until_the_test_releases_it(
    tmp_path: Path,
) -> None:
    gate = FileGate(tmp_path, "tool")
    first, second = _start_child_at_gate(tmp_path, "tool"), _start_child_at_gate(tmp_path, "tool")
    try:
        await gate.wait_until_reached(count=2)
        assert first.poll() is None and second.poll() is None  # both held at the gate

        gate.release()

        assert first.communicate(timeout=30)[0].strip() == "released"
        assert second.communicate(timeout=30)[0].strip() == "released"
        assert gate.reached_count == 2
    finally:
        first.kill()
        second.kill()


async def test_a_released_gate_stays_open_for_later_arrivals(tmp_path: Path) -> None:
    gate = FileGate(tmp_path, "open")
    gate.release()
    gate.mark_reached()

    await gate.wait_for_release()
    gate.wait_for_release_blocking()

    assert gate.reached_count == 1


async def test_waiting_for_an_arrival_that_never_comes_names_the_gate(tmp_path: Path) -> None:
    gate = FileGate(tmp_path, "never")

    with pytest.raises(WaitTimeoutError, match="gate 'never' to be reached 1 time"):
        await gate.wait_until_reached(timeout=0.1)


@pytest.mark.parametrize("name", ["", "a/b", ".."])
def test_a_gate_name_must_be_a_plain_file_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigurationError, match="gate name"):
        FileGate(tmp_path, name)
