"""Client options the engine README's support table lists, checked through the SDK's public
client: a start request retried with its request ID, and a SubFlow's retry policy."""

from __future__ import annotations

from datetime import timedelta

import dex
import pytest
from dex import (
    Flow,
    FlowStatus,
    Step,
    StepDecision,
    StepList,
    SubFlow,
    SubFlowOptions,
    Timer,
    Wait,
    graceful_complete,
)
from engine_kernel_harness import serving_client

WAIT = timedelta(seconds=30)
RUNS: list[str] = []


class Park(Step[str]):
    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(hours=1)))

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete(input)


class Parked(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Park())


class FailsOnce(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        RUNS.append(context.flow_id)
        if RUNS.count(context.flow_id) == 1:
            return dex.force_fail("first run fails")
        return graceful_complete(f"{input}:runs={RUNS.count(context.flow_id)}")


class Flaky(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(FailsOnce())


FLAKY = Flaky()


class Spawn(Step[str]):
    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        retry = dex.RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=2)
        return Wait.until(SubFlow.run(FLAKY, input, SubFlowOptions(retry_policy=retry)))

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        result = SubFlow.get_condition_results(context, 0)
        return graceful_complete(result.completions[0].decode(str))


class Parent(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Spawn())


PARKED = Parked()
PARENT = Parent()
FLOWS: list[Flow] = [PARKED, FLAKY, PARENT]  # type: ignore[type-arg]


async def test_a_start_retried_with_its_request_id_gets_the_same_run() -> None:
    async with serving_client(FLOWS) as client:
        same = dex.StartFlowOptions(request_id="start-once")
        first = await client.start_flow(PARKED, "req-1", "x", same)
        assert await client.start_flow(PARKED, "req-1", "x", same) == first
        with pytest.raises(dex.FlowAlreadyStartedError):
            await client.start_flow(PARKED, "req-1", "x", dex.StartFlowOptions(request_id="other"))


async def test_a_sub_flows_retry_policy_restarts_it() -> None:
    async with serving_client(FLOWS) as client:
        await client.start_flow(PARENT, "spawner", "child")
        result = await client.wait_for_flow("spawner", timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED
    assert result.single_output(str) == "child:runs=2"
