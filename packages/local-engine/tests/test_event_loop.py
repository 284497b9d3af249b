"""The engine's event loop: asyncio's by default, uvloop on request, and a clear error otherwise."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from dex import FlowStatus
from dex_local_engine.event_loop import EVENT_LOOP_ENV, EventLoopKind, choose_event_loop
from engine_kernel_harness import running_engine, serve_once, serving
from test_engine_first_light import FirstLight


def _loaded_uvloop(pid: int) -> bool:
    """Whether process ``pid`` has uvloop's compiled loop mapped (Linux ``/proc``)."""
    return "uvloop" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.parametrize("kind", list(EventLoopKind))
async def test_a_flow_completes_on_each_event_loop(
    kind: EventLoopKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EVENT_LOOP_ENV, kind.value)
    flow = FirstLight()
    async with serving([flow]) as (engine, client):
        assert engine.process is not None
        assert _loaded_uvloop(engine.process.pid) is (kind is EventLoopKind.UVLOOP)
        await client.start_flow(flow, "loop-1", "hello")
        assert await client.invoke_rpc(flow.post, "loop-1", "a") == 1
        assert await client.invoke_rpc(flow.post, "loop-1", "b") == 2
        result = await client.wait_for_flow("loop-1", timeout=timedelta(seconds=30))
        assert result.status is FlowStatus.COMPLETED
        assert result.completions[0].decode(str) == "hello|a,b|2|AwaitMessage-1|Pause-1"


async def test_the_default_engine_runs_on_asyncios_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    assert choose_event_loop({})[0] is EventLoopKind.ASYNCIO
    async with running_engine() as engine:
        assert engine.process is not None
        assert not _loaded_uvloop(engine.process.pid)


def test_an_unknown_event_loop_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expected one of uvloop, asyncio"):
        choose_event_loop({EVENT_LOOP_ENV: "trio"})
    refused = serve_once(tmp_path / "engine.db", env={EVENT_LOOP_ENV: "trio", "PATH": ""})
    assert refused.returncode == 1
    assert f"{EVENT_LOOP_ENV}='trio'" in refused.stderr
    assert not (tmp_path / "engine.db").exists()


def test_start_up_objects_are_frozen_out_of_collections() -> None:
    # In a child: freezing this test process's objects would outlive the test.
    code = (
        "import gc; from dex_local_engine.event_loop import freeze_startup_objects; "
        "freeze_startup_objects(); print(gc.get_freeze_count() > 0, gc.get_threshold()[0])"
    )
    frozen = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert frozen.stdout.split() == ["True", "100000"]
