from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from core_testing_support.processes import process_exists
from dex_agents.testing import SERVER_ADDRESS_ENV, WorkerProcess, WorkerStartError, wait_until

TESTS_DIR = Path(__file__).resolve().parent


async def _start_fake_worker(tmp_path: Path, **env: str) -> WorkerProcess:
    return await WorkerProcess.start(
        "core_testing_support.fake_worker",
        server_address="127.0.0.1:1",
        state_dir=tmp_path / "worker",
        cwd=TESTS_DIR,
        env={"FAKE_WORKER_GRANDCHILD_PID_FILE": str(tmp_path / "grandchild.pid"), **env},
    )


async def test_kill_sigkills_the_whole_process_group(tmp_path: Path) -> None:
    worker = await _start_fake_worker(tmp_path)
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    assert worker.is_running and process_exists(grandchild)

    worker.kill()

    assert not worker.is_running
    assert worker.process.returncode == -9

    await wait_until("the grandchild to die", lambda: not process_exists(grandchild))


async def test_a_worker_that_exits_before_it_is_ready_reports_its_stderr(tmp_path: Path) -> None:
    with pytest.raises(WorkerStartError, match=r"exited with status 1.*no registry here"):
        await _start_fake_worker(tmp_path, FAKE_WORKER_FAIL="no registry here")


def test_run_agent_worker_outside_a_stack_says_how_to_start_it() -> None:
    env = {key: value for key, value in os.environ.items() if key != SERVER_ADDRESS_ENV}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from dex_agents.testing import run_agent_worker; run_agent_worker([])",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 1
    assert "AgentTestStack.start_worker()" in result.stderr
