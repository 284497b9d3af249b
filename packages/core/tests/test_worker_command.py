"""``dex-agents worker`` as a process against the real engine: it serves, it stops gracefully on
SIGTERM in the middle of a Step (finishing it, or cutting it off for Dex to retry or record), and
a bad import path gives a clear error and exit status 3."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest
from dex import AsyncClient, BlobCacheConfig, ClientOptions, Registry, WorkerTarget, open_blob_cache
from dex_agents import AgentSessionClient, AgentToolCallStatus, TurnStatus, agent_codec_registry
from dex_agents.testing import EngineLogs, EngineProcess, FileGate
from dex_agents.testing._child_process import orphan_guarded
from worker_command_test_support import GATES_ENV, flows, support_flow

_TESTS_DIR = Path(__file__).resolve().parent


def _command(*arguments: str) -> list[str]:
    script = Path(sys.executable).with_name("dex-agents")
    return [str(script), "worker", *arguments]


def _env(gates: Path) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(_TESTS_DIR), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, GATES_ENV: str(gates)}


@contextmanager
def _worker(address: str, gates: Path, *extra: str) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        orphan_guarded(_command("worker_command_test_support:flows", "--address", address, *extra)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(gates),
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready.startswith("dex-agents worker ready: serving WorkerSupportAgent, "), ready + (
            process.stderr.read() if process.poll() is not None and process.stderr else ""
        )
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


@asynccontextmanager
async def _engine_and_sessions(tmp_path: Path) -> AsyncIterator[tuple[str, AgentSessionClient]]:
    engine = await EngineProcess.start_local(
        tmp_path / "engine.db", EngineLogs.in_directory(tmp_path)
    )
    cache = open_blob_cache(BlobCacheConfig(str(tmp_path / "client-cache"), 16 * 1024 * 1024))
    client = AsyncClient(
        Registry(flows, agent_codec_registry(), allow_async_handlers=True),
        cache,
        ClientOptions(server_address=engine.server_address, worker_target=WorkerTarget(pull=True)),
    )
    try:
        yield engine.server_address, AgentSessionClient(client, support_flow)
    finally:
        await client.close()
        cache.close()
        await engine.stop()


async def _exit_status(process: subprocess.Popen[str]) -> int:
    return await asyncio.to_thread(process.wait, 60)


async def test_the_worker_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    async with _engine_and_sessions(tmp_path) as (address, sessions):
        with _worker(address, tmp_path / "gates", "--task-slots", "2") as worker:
            result = await sessions.run_turn("s1", "hello", timeout=60)
            assert (result.status, result.text) == (TurnStatus.COMPLETED, "You said: hello")
            # The Worker froze its start-up objects out of the collector before serving.
            frozen = await sessions.run_turn("s2", "how many frozen objects?", timeout=60)
            assert frozen.text is not None and frozen.text.startswith("Frozen objects: ")
            assert int(frozen.text.removeprefix("Frozen objects: ")) > 10_000
            # Its blob cache is a temporary directory named for it (a later Worker removes it if
            # this one is killed), and it removes it when it stops.
            caches = list(Path(tempfile.gettempdir()).glob(f"dex-agents-worker-{worker.pid}-*"))
            assert len(caches) == 1
            worker.send_signal(signal.SIGTERM)
            assert await _exit_status(worker) == 0
            assert not caches[0].exists()


async def test_sigterm_mid_step_lets_the_step_finish_within_the_drain_time(
    tmp_path: Path,
) -> None:
    gates = tmp_path / "gates"
    gate = FileGate(gates, "lookup")
    async with _engine_and_sessions(tmp_path) as (address, sessions):
        token = ""
        with _worker(address, gates, "--drain-timeout", "60") as worker:
            await sessions.start_session("s1", "where is my order?")
            await gate.wait_until_reached(timeout=60)
            worker.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.5)
            assert worker.poll() is None  # draining: the tool still runs
            gate.release()
            assert await _exit_status(worker) == 0
        # The next model call needs a Worker: a replacement finishes the turn.
        with _worker(address, gates):
            result = await sessions.wait_for_turn("s1", token, turn_id="turn-1", timeout=60)
        assert result.text == "Done: order 7 was delivered"
        assert gate.reached_count == 1


async def test_a_step_cut_off_after_the_drain_time_is_retried_or_recorded(
    tmp_path: Path,
) -> None:
    gates = tmp_path / "gates"
    lookup, refund = FileGate(gates, "lookup"), FileGate(gates, "refund")
    async with _engine_and_sessions(tmp_path) as (address, sessions):
        with _worker(address, gates, "--drain-timeout", "1") as worker:
            await sessions.start_session("read", "where is my order?")
            await lookup.wait_until_reached(timeout=60)
            write = await sessions.run_turn("write", "refund please", timeout=60)
            (approval,) = write.pending_interrupts
            await sessions.resolve_interrupt("write", approval.interrupt_id, approved=True)
            await refund.wait_until_reached(timeout=60)
            worker.send_signal(signal.SIGTERM)
            assert await _exit_status(worker) == 0  # after one second, both tools cut off
        lookup.release()
        refund.release()
        with _worker(address, gates):
            read = await sessions.wait_for_turn("read", "", turn_id="turn-1", timeout=90)
            written = await sessions.wait_for_turn("write", write, timeout=90)
        # The read ran again on the replacement; the write that may have run is not repeated.
        assert read.text == "Done: order 7 was delivered"
        assert lookup.reached_count == 2
        (call,) = written.tool_calls
        assert call.status is AgentToolCallStatus.OUTCOME_UNKNOWN
        assert refund.reached_count == 1


async def test_task_slots_bound_the_steps_at_once_and_the_rest_wait_without_failing(
    tmp_path: Path,
) -> None:
    """``--task-slots 3``: the SDK keeps one slot for RPCs, so two Steps run at once. The other
    sessions' Steps wait in the engine for a free slot (back-pressure): an RPC still answers at
    the bound, and once the slots free every turn completes, none failed or retried."""
    gates = tmp_path / "gates"
    lookup = FileGate(gates, "lookup")
    names = [f"s{number}" for number in range(5)]
    async with _engine_and_sessions(tmp_path) as (address, sessions):
        with _worker(address, gates, "--task-slots", "3"):
            for name in names:
                await sessions.start_session(name, "where is my order?")
            await lookup.wait_until_reached(count=2, timeout=60)
            # At the bound: the reserved slot still answers an RPC (the turn-state read) of a
            # session whose Steps wait.
            state = await sessions.get_agent_state(names[-1])
            assert state.last_turn_error is None
            await asyncio.sleep(1.0)  # time enough for a third lookup, were there a slot
            assert lookup.reached_count == 2
            lookup.release()
            results = [
                await sessions.wait_for_turn(name, "", turn_id="turn-1", timeout=90)
                for name in names
            ]
    assert [(r.status, r.text) for r in results] == [
        (TurnStatus.COMPLETED, "Done: order 7 was delivered")
    ] * len(names)
    assert lookup.reached_count == len(names)  # each lookup ran once: none failed and retried


@pytest.mark.parametrize(
    ("import_path", "message"),
    [
        ("worker_command_test_support", "is not an import path: write module:attribute"),
        ("no_such_module_here:flows", "no module named 'no_such_module_here'"),
        ("worker_command_test_support:missing", "has no attribute 'missing'"),
        ("worker_command_test_support:not_a_flow", "is str, not a Flow"),
        ("dex_agents:AgentSessionClient", "is the class AgentSessionClient, not a Flow"),
    ],
)
def test_a_bad_import_path_exits_3_with_a_clear_error(
    tmp_path: Path, import_path: str, message: str
) -> None:
    finished = subprocess.run(
        _command(import_path, "--address", "127.0.0.1:1"),
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=120,
    )
    assert finished.returncode == 3, finished.stderr
    assert message in finished.stderr
    assert finished.stdout == ""


def test_an_unreachable_engine_exits_4(tmp_path: Path) -> None:
    finished = subprocess.run(
        _command("worker_command_test_support:build_flows", "--address", "127.0.0.1:1"),
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=120,
    )
    assert finished.returncode == 4, finished.stderr
    assert "did not register with 127.0.0.1:1" in finished.stderr
