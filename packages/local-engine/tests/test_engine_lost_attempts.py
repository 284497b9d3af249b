"""An attempt lost to an engine restart runs again without using up the Step's retry budget.

A Step method in flight when the engine is SIGKILLed may have run, so the restarted engine fails
that attempt as lost and dispatches the next attempt number; the retry policy's
``maximum_attempts`` does not count it (a restart is the engine's failure, not the method's).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import dex
from dex import Flow, FlowStatus, RetryPolicy, Step, StepList, StepOptions
from dex_local_engine.step_scheduler import FREE_LOST_ATTEMPTS
from engine_kernel_harness import reachable, running_engine, sdk_client, sdk_worker

WAIT = timedelta(seconds=60)
_KILLS = 3
_MAXIMUM_ATTEMPTS = 2
started_attempts: list[int] = []
"""The attempt numbers the Step's execute began with (the Workers run in the test's loop)."""


class Slow(Step[str]):
    """Stays in flight for its first ``_KILLS`` attempts (the engine is killed meanwhile)."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(
                maximum_attempts=_MAXIMUM_ATTEMPTS, initial_interval=timedelta(seconds=1)
            )
        )

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        started_attempts.append(context.attempt)
        if context.attempt <= _KILLS:
            await asyncio.sleep(3600)
        return dex.force_complete(f"attempt={context.attempt}")


class LostFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Slow())


async def _started(count: int) -> None:
    for _ in range(600):
        if len(started_attempts) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"attempt {count} never started: {started_attempts}")


async def test_attempts_lost_to_engine_kills_do_not_use_up_maximum_attempts() -> None:
    assert _KILLS + 1 <= FREE_LOST_ATTEMPTS + _MAXIMUM_ATTEMPTS - 1
    started_attempts.clear()
    flow = LostFlow()
    async with running_engine() as engine:
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await client.start_flow(flow, "lost", "go")
            await _started(1)
            engine.kill()
        for kill in range(2, _KILLS + 1):
            engine.start()
            async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
                await reachable(client)
                await _started(kill)
                engine.kill()
        engine.start()
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await reachable(client)
            result = await client.wait_for_flow("lost", timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, result
    assert result.completions[0].decode(str) == f"attempt={_KILLS + 1}"
    assert started_attempts == list(range(1, _KILLS + 2))
