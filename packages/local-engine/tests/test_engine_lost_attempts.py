"""An attempt lost to an engine restart counts against ``maximum_attempts``: never one run too many;
and only an attempt a Worker took is lost (issue 36 case 6).

A Step method in flight when the engine is SIGKILLed may have run, so the restarted engine fails
that attempt as lost and its retry policy decides. ``maximum_attempts`` bounds how often the method
may have run, restarts included: that is what keeps a single-attempt tool Step's write from
running twice. (Letting lost attempts run free was tried and the fault-injection test caught
non-idempotent writes running twice.) A Step that only waited in the engine for a free Worker
slot never reached a Worker, so it runs normally after the restart and uses no attempt.
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


write_attempts: list[tuple[str, int]] = []
"""(Flow ID, attempt) of each start of a single-attempt write Step."""


class _OneAttemptWrite(Step[str]):
    """A non-idempotent write: one attempt only."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=1))

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        write_attempts.append((context.flow_id, context.attempt))
        if input == "hold":
            await asyncio.sleep(3600)  # on the Worker until the engine dies
        return dex.force_complete(f"wrote {input}")


class Write(_OneAttemptWrite):
    pass


class HoldingWrite(_OneAttemptWrite):
    pass


class WriteFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Write())


class HoldingFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(HoldingWrite())


async def _write_started(flow_id: str) -> None:
    for _ in range(600):
        if any(started == flow_id for started, _ in write_attempts):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the write of {flow_id} never started: {write_attempts}")


async def test_a_step_that_waited_for_a_worker_runs_normally_after_a_restart() -> None:
    write_attempts.clear()
    waiting, holding = WriteFlow(), HoldingFlow()
    async with running_engine() as engine:
        async with (
            sdk_client(engine, [waiting, holding]) as client,
            sdk_worker(engine, [holding]),  # no Worker serves WriteFlow yet
        ):
            await client.start_flow(holding, "holder", "hold")
            await _write_started("holder")
            await client.start_flow(waiting, "waiter", "w")  # its task waits in the engine
            engine.kill()
        engine.start()
        async with (
            sdk_client(engine, [waiting, holding]) as client,
            sdk_worker(engine, [waiting, holding]),
        ):
            await reachable(client)
            waiter = await client.wait_for_flow("waiter", timeout=WAIT)
            holder = await client.wait_for_flow("holder", timeout=WAIT)
    assert waiter.status is FlowStatus.COMPLETED, (waiter.error_message, write_attempts)
    assert write_attempts.count(("waiter", 1)) == 1 and ("waiter", 2) not in write_attempts
    # The write that was on a Worker may have run: lost, and with one attempt it fails.
    assert holder.status is FlowStatus.FAILED, holder
    assert "the engine stopped while this attempt was in flight" in (holder.error_message or "")
    assert write_attempts.count(("holder", 1)) == 1
