from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from dex_agents.testing import (
    EngineDurability,
    EngineLogs,
    EngineProcess,
    EngineStartError,
    StepHistoryError,
    read_step_history,
    wait_until,
)


async def test_the_local_engine_starts_on_a_free_port_and_stops(tmp_path: Path) -> None:
    engine = await EngineProcess.start_local(
        tmp_path / "engine.db",
        EngineLogs.in_directory(tmp_path),
        durability=EngineDurability.PROCESS_CRASH_SAFE,
    )
    try:
        host, port = engine.server_address.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        engine.check_running()
    finally:
        await engine.stop()

    assert engine.process.returncode is not None
    with pytest.raises(EngineStartError, match="exited with status"):
        engine.check_running()


async def test_an_unusable_database_fails_with_the_engines_error(tmp_path: Path) -> None:
    directory_as_database = tmp_path / "a-directory"
    directory_as_database.mkdir()

    with pytest.raises(EngineStartError, match="dex-local-engine exited with status 1"):
        await EngineProcess.start_local(directory_as_database, EngineLogs.in_directory(tmp_path))


async def test_the_history_of_an_unknown_flow_fails_with_a_clear_error(tmp_path: Path) -> None:
    engine = await EngineProcess.start_local(
        tmp_path / "engine.db", EngineLogs.in_directory(tmp_path)
    )
    try:
        with pytest.raises(StepHistoryError, match="no-such-flow"):
            await read_step_history(engine.server_address, "no-such-flow")
    finally:
        await engine.stop()


_PARENT_OF_AN_ENGINE = """
import asyncio, sys
from pathlib import Path
from dex_agents.testing import EngineLogs, EngineProcess
directory = Path(sys.argv[1])
engine = asyncio.run(EngineProcess.start_local(directory / "engine.db", EngineLogs.in_directory(directory)))
print(engine.process.pid, flush=True)
sys.stdin.read()
"""


async def test_an_engine_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT_OF_AN_ENGINE, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    engine_pid = int(parent.stdout.readline())

    parent.send_signal(signal.SIGKILL)
    parent.wait()

    def engine_is_gone() -> bool:
        try:
            os.kill(engine_pid, 0)
        except ProcessLookupError:
            return True
        return Path(f"/proc/{engine_pid}/stat").read_text().split()[2] == "Z"

    await wait_until("the orphaned engine to die", engine_is_gone)
