"""LocalRuntime against the real engine: start, reuse, an address, and cleanup after Ctrl+C."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest
from dex_agents import AgentSessionFlow, ConfigurationError, TurnStatus
from dex_agents.runtime import ENGINE_ADDRESS_FILE, LocalRuntime, LocalRuntimeError
from dex_agents.stepwise import (
    AgentDefinition,
    ScriptedModelClient,
    ScriptedModelReply,
    stepwise_agent_session_flow,
)
from dex_agents.testing import wait_until
from foreground_job import default_interrupt_signal


def _flow(flow_type: str = "RuntimeAgent") -> AgentSessionFlow:
    agent = AgentDefinition(
        name="echo",
        instructions="Repeat the user.",
        model=ScriptedModelClient(
            lambda request: ScriptedModelReply(text=ScriptedModelClient.user_texts(request)[-1])
        ),
    )
    return stepwise_agent_session_flow(agent, flow_type=flow_type)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes: it serves nothing.
    try:
        return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") < 0
    except FileNotFoundError:
        return False


async def test_runtime_starts_an_engine_and_stops_it(tmp_path: Path) -> None:
    flow = _flow()
    gc.unfreeze()  # an earlier runtime in this test process may have frozen objects already
    async with LocalRuntime([flow], directory=tmp_path) as runtime:
        assert runtime.started_engine
        # The runtime froze what start-up left alive out of the collector once its Worker ran.
        assert gc.get_freeze_count() > 10_000
        recorded = json.loads((tmp_path / ENGINE_ADDRESS_FILE).read_text())
        assert recorded["address"] == runtime.server_address
        result = await runtime.sessions().run_turn("s1", "hello there", timeout=60)
        assert (result.status, result.text) == (TurnStatus.COMPLETED, "hello there")
    assert not (tmp_path / ENGINE_ADDRESS_FILE).exists()
    assert not _alive(recorded["pid"])

    # The sessions live on in the database: a new runtime continues them.
    async with LocalRuntime([flow], directory=tmp_path) as runtime:
        second = await runtime.sessions(flow).run_turn("s1", "again", timeout=60)
        assert (second.turn_id, second.text) == ("turn-2", "again")


async def test_a_second_runtime_reuses_the_running_engine(tmp_path: Path) -> None:
    first_flow, second_flow = _flow("FirstAgent"), _flow("SecondAgent")
    async with LocalRuntime([first_flow], directory=tmp_path) as first:
        async with LocalRuntime([second_flow], directory=tmp_path) as second:
            assert not second.started_engine
            assert second.server_address == first.server_address
            result = await second.sessions().run_turn("s2", "from the second", timeout=60)
            assert result.text == "from the second"
        # The second left the engine to the first, which still works.
        assert (tmp_path / ENGINE_ADDRESS_FILE).exists()
        assert (await first.sessions().run_turn("s1", "still here", timeout=60)).completed


async def test_a_runtime_with_an_address_starts_no_engine(tmp_path: Path) -> None:
    flow = _flow()
    async with LocalRuntime([flow], directory=tmp_path / "owner") as owner:
        async with LocalRuntime(
            [flow], server_address=owner.server_address, directory=tmp_path / "guest"
        ) as guest:
            assert not guest.started_engine
            assert (await guest.sessions().run_turn("s1", "hi", timeout=60)).completed
        assert not (tmp_path / "guest" / ENGINE_ADDRESS_FILE).exists()
    # The owner's engine left nothing beside the runtimes' directories.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["guest", "owner"]


async def test_a_stale_address_file_is_ignored(tmp_path: Path) -> None:
    (tmp_path / ENGINE_ADDRESS_FILE).write_text(json.dumps({"address": "127.0.0.1:1", "pid": 1}))
    async with LocalRuntime([_flow()], directory=tmp_path) as runtime:
        assert runtime.started_engine
        assert runtime.server_address != "127.0.0.1:1"


async def test_misuse_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="at least one Flow"):
        LocalRuntime([])
    runtime = LocalRuntime([_flow()], directory=tmp_path)
    with pytest.raises(LocalRuntimeError, match="not running"):
        runtime.sessions()
    async with runtime:
        with pytest.raises(ConfigurationError, match="does not serve"):
            runtime.sessions(_flow("OtherAgent"))
    await runtime.close()  # a second close does nothing


async def test_an_unreachable_address_fails_the_start(tmp_path: Path) -> None:
    runtime = LocalRuntime(
        [_flow()],
        server_address="127.0.0.1:1",
        directory=tmp_path,
        stop_drain_timeout=timedelta(seconds=1),
    )
    with pytest.raises(LocalRuntimeError, match="did not register"):
        await runtime.start()


_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from dex_agents.runtime import LocalRuntime
    from dex_agents.stepwise import (
        AgentDefinition, ScriptedModelClient, ScriptedModelReply, stepwise_agent_session_flow)

    agent = AgentDefinition(name="echo", instructions="Echo.",
        model=ScriptedModelClient(lambda request: ScriptedModelReply(text="hi")))
    flow = stepwise_agent_session_flow(agent, flow_type="InterruptedAgent")

    async def main() -> None:
        async with LocalRuntime([flow], directory=Path(sys.argv[1])) as runtime:
            await runtime.sessions().run_turn("s1", "hello", timeout=60)
            print("ready", flush=True)
            await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


async def test_ctrl_c_stops_the_worker_and_the_engine(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_interrupt_signal,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        engine_pid = json.loads((tmp_path / ENGINE_ADDRESS_FILE).read_text())["pid"]
        assert _alive(engine_pid)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        assert "KeyboardInterrupt" in stderr
        await wait_until("the engine to exit", lambda: not _alive(engine_pid) or None, timeout=30)
        assert not (tmp_path / ENGINE_ADDRESS_FILE).exists()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_start_and_close_as_a_notebook_calls_them(tmp_path: Path) -> None:
    first, second = _flow("FirstAgent"), _flow("SecondAgent")
    runtime = await LocalRuntime([first, second], directory=tmp_path).start()
    try:
        with pytest.raises(LocalRuntimeError, match="already running"):
            await runtime.start()
        with pytest.raises(ConfigurationError, match="serves 2 session Flows; name one"):
            runtime.sessions()
        result = await runtime.sessions(second).run_turn("s1", "in a cell", timeout=60)
        assert result.text == "in a cell"
        assert await runtime.client.health_check()
    finally:
        await runtime.close()
    assert not (tmp_path / ENGINE_ADDRESS_FILE).exists()
    with pytest.raises(LocalRuntimeError, match="not running"):
        runtime.client  # noqa: B018
