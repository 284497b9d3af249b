"""The engine's event loop: uvloop by default, asyncio's on request, and a clear error otherwise."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import dex
import engine_kernel_harness
import pytest
from dex import (
    Flow,
    FlowStatus,
    PersistenceSchema,
    Step,
    StepDecision,
    StepList,
    Timer,
    Wait,
    go_to,
    graceful_complete,
)
from dex_local_engine.event_loop import EVENT_LOOP_ENV, EventLoopKind, choose_event_loop
from engine_kernel_harness import running_engine, serve_once, serving
from test_engine_first_light import FirstLight

_EARLY_TIMER_ENGINE = Path(__file__).resolve().parent / "early_timer_engine_main.py"
_NAPS = 8
"""Flows of :class:`Nap`, each waiting on its own Timer (a Timer of a run wakes every due Step of
that run, so one late Timer would hide another's early one)."""


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


class _Wake(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return go_to(_Nap, input)


class _Nap(Step[str]):
    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=1)))

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete(f"{input}:{context.has_timer_fired(0)}")


class Nap(Flow[str]):
    """One Step that waits on a one-second Timer, then completes the Flow."""

    def __init__(self) -> None:
        self.wake = _Wake()
        self.nap = _Nap()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.wake).other_steps(self.nap)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of()


@pytest.mark.parametrize("loop", ["uvloop", "early-timers"])
async def test_a_timer_wakes_its_step_when_the_loop_runs_timers_early(
    loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Timer completes once time.time() reaches its firing time; a loop may run the engine's
    # call_later callback before that (uvloop, now and then, by up to a millisecond; the
    # early-timers engine, always, by 50 ms). The Step must wake all the same, not wait for ever
    # (what stalled the shared suite's Worker-kill and approval-deadline scenarios on uvloop).
    if loop == "uvloop":
        monkeypatch.setenv(EVENT_LOOP_ENV, EventLoopKind.UVLOOP.value)
    else:
        monkeypatch.setattr(
            engine_kernel_harness,
            "_serve_command",
            lambda address, database, *extra: [
                sys.executable,
                str(_EARLY_TIMER_ENGINE),
                "serve",
                "--address",
                address,
                "--database",
                str(database),
                *extra,
            ],
        )
    flow = Nap()
    flow_ids = [f"nap-{n}" for n in range(_NAPS)]
    async with serving([flow]) as (_, client):
        for flow_id in flow_ids:
            await client.start_flow(flow, flow_id, flow_id)
        for flow_id in flow_ids:
            result = await client.wait_for_flow(flow_id, timeout=timedelta(seconds=60))
            assert result.status is FlowStatus.COMPLETED
            woke = [completion.decode(str) for completion in result.completions]
            assert woke == [f"{flow_id}:True"]


async def test_the_default_engine_runs_on_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    assert choose_event_loop({})[0] is EventLoopKind.UVLOOP
    async with running_engine() as engine:
        assert engine.process is not None
        assert _loaded_uvloop(engine.process.pid)


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
