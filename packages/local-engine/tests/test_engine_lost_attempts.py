"""An attempt lost to an engine restart counts against ``maximum_attempts``: never one run too many.

A Step method in flight when the engine is SIGKILLed may have run, so the restarted engine fails
that attempt as lost and its retry policy decides. ``maximum_attempts`` bounds how often the method
may have run, restarts included: that is what keeps a single-attempt tool Step's write from
running twice. (Letting lost attempts run free was tried and the fault-injection test caught
non-idempotent writes running twice.)
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import dex
from dex import Flow, FlowStatus, RetryPolicy, Step, StepList, StepOptions
from engine_kernel_harness import reachable, running_engine, sdk_client, sdk_worker

WAIT = timedelta(seconds=60)
_MAXIMUM_ATTEMPTS = 2
started_attempts: list[int] = []
"""The attempt numbers the Step's execute began with (the Workers run in the test's loop)."""


class Slow(Step[str]):
    """Stays in flight until the engine is killed, on every attempt."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(
                maximum_attempts=_MAXIMUM_ATTEMPTS, initial_interval=timedelta(seconds=1)
            )
        )

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        started_attempts.append(context.attempt)
        await asyncio.sleep(3600)
        return dex.force_complete("unreachable")


class LostFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Slow())


async def _started(count: int) -> None:
    for _ in range(600):
        if len(started_attempts) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"attempt {count} never started: {started_attempts}")


async def test_attempts_lost_to_engine_kills_count_against_maximum_attempts() -> None:
    started_attempts.clear()
    flow = LostFlow()
    async with running_engine() as engine:
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await client.start_flow(flow, "lost", "go")
            await _started(1)
            engine.kill()
        engine.start()
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await reachable(client)
            await _started(2)  # the lost first attempt was retried, with the next number
            engine.kill()
        engine.start()
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await reachable(client)
            result = await client.wait_for_flow("lost", timeout=WAIT)
            await asyncio.sleep(1.5)  # a third attempt would have started within its interval
    assert result.status is FlowStatus.FAILED, result
    assert "the engine stopped while this attempt was in flight" in (result.error_message or ""), (
        result
    )
    assert started_attempts == [1, 2]
