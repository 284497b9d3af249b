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
from dex_agents.testing._fork_server import FORK_SERVER_ENV


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


def _parent_pid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.skipif(os.environ.get(FORK_SERVER_ENV) == "0", reason="fork servers are off")
async def test_local_engines_fork_from_one_warm_parent(tmp_path: Path) -> None:
    engines = [
        await EngineProcess.start_local(
            tmp_path / name / "engine.db",
            EngineLogs.in_directory(tmp_path / name),
            warm_start=True,
        )
        for name in ("first", "second")
    ]
    try:
        parents = {_parent_pid(engine.process.pid) for engine in engines}
        # Not children of this process: both forked by the one fork server of the engine.
        assert len(parents) == 1 and os.getpid() not in parents
        for name, engine in zip(("first", "second"), engines, strict=True):
            engine.check_running()
            assert (tmp_path / name / "engine.db").exists()  # each got its own arguments
    finally:
        for engine in engines:
            await engine.stop()


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
