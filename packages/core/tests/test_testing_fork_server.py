"""Worker children forked from a warm parent (``dex_agents.testing._fork_server``)."""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from core_testing_support.processes import process_exists
from dex_agents.testing import WorkerProcess, WorkerStartError, wait_until
from dex_agents.testing._fork_server import FORK_SERVER_ENV

TESTS_DIR = Path(__file__).resolve().parent
MODULE = "core_testing_support.forked_worker"


async def _start(
    tmp_path: Path, name: str, preload_env: dict[str, str], **env: str
) -> tuple[WorkerProcess, dict[str, Any]]:
    report = tmp_path / f"{name}.json"
    worker = await WorkerProcess.start(
        MODULE,
        server_address="127.0.0.1:1",
        state_dir=tmp_path / "workers" / name,
        cwd=TESTS_DIR,
        env={"FORKED_WORKER_REPORT": str(report), **preload_env, **env},
        preload_env=preload_env,
    )
    return worker, json.loads(report.read_text())


async def test_forked_workers_are_killed_as_a_group_and_die_with_their_warm_parent(
    tmp_path: Path,
) -> None:
    preload_env = {"FORKED_WORKER_CASE": tmp_path.name}
    first, report = await _start(tmp_path, "first", preload_env)

    # Forked from the process that ran preload_worker(), not started by this one.
    server = report["parent"]
    assert report["pid"] == first.pid and server != os.getpid()
    assert report["preloaded_in"] == server
    assert report["cwd"] == str(TESTS_DIR)
    assert report["argv0"].endswith("forked_worker.py")
    # The warm parent froze what its preload left alive, so no child collects it again.
    assert report["frozen_objects"] > 10_000
    first.kill()
    assert not first.is_running and first.process.returncode == -signal.SIGKILL
    await wait_until("the grandchild to die", lambda: not process_exists(report["grandchild"]))

    second, report = await _start(tmp_path, "second", preload_env)
    assert report["parent"] == server and second.pid != first.pid
    assert await second.stop(timeout=10) == -signal.SIGTERM

    third, report = await _start(tmp_path, "third", preload_env)
    os.kill(server, signal.SIGKILL)  # the warm parent dies, as with the test process
    await wait_until("the forked Worker to die", lambda: not process_exists(third.pid))
    assert third.process.wait(10) == -signal.SIGKILL

    _, report = await _start(tmp_path, "fourth", preload_env)
    assert report["parent"] not in (server, os.getpid())


async def test_a_change_of_the_environment_starts_another_warm_parent_unless_litellm_made_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    preload_env = {"FORKED_WORKER_CASE": tmp_path.name}
    first, report = await _start(tmp_path, "first", preload_env)
    server = report["parent"]
    first.kill()
    # LiteLLM's import sets it in this process: the warm parent stays the same.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tokenizers"))
    second, report = await _start(tmp_path, "second", preload_env)
    assert report["parent"] == server
    second.kill()
    # Any other change: the module may import differently under it, so another warm parent.
    monkeypatch.setenv("FORKED_WORKER_OTHER_SETTING", "1")
    third, report = await _start(tmp_path, "third", preload_env)
    assert report["parent"] not in (server, os.getpid())
    third.kill()


async def test_a_forked_worker_that_exits_before_it_is_ready_reports_its_stderr(
    tmp_path: Path,
) -> None:
    with pytest.raises(WorkerStartError, match=r"exited with status 1.*no registry here"):
        await _start(
            tmp_path,
            "failing",
            {"FORKED_WORKER_CASE": tmp_path.name},
            FORKED_WORKER_FAIL="no registry here",
        )


async def test_a_preload_that_starts_a_thread_falls_back_to_python_m(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    preload_env = {"FORKED_WORKER_CASE": tmp_path.name, "FORKED_WORKER_PRELOAD_THREAD": "1"}
    with caplog.at_level(logging.WARNING):
        worker, report = await _start(tmp_path, "threaded", preload_env)

    assert report["parent"] == os.getpid()  # python -m, behind the orphan guard
    assert report["preloaded_in"] is None
    assert "started threads" in caplog.text and "forking its process is unsafe" in caplog.text
    worker.kill()


async def test_the_fork_server_can_be_turned_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FORK_SERVER_ENV, "0")
    worker, report = await _start(tmp_path, "spawned", {"FORKED_WORKER_CASE": tmp_path.name})

    assert report["parent"] == os.getpid() and report["preloaded_in"] is None
    assert report["frozen_objects"] == 0
    worker.kill()
