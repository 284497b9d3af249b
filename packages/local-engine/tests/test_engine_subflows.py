"""Lower-priority kernel features through the real SDK: SubFlows, Flow timeouts (handler and
fail), Flows without a start Step, and start delays."""

from __future__ import annotations

from datetime import timedelta

import dex
from dex import (
    Channel,
    Flow,
    FlowStatus,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    SubFlow,
    Wait,
    go_to,
    graceful_complete,
    rpc,
)
from engine_kernel_harness import serving_client

WAIT = timedelta(seconds=30)


class Double(Step[int]):
    async def execute(self, context: dex.AsyncContext, input: int) -> StepDecision:
        return graceful_complete(input * 2)


class Child(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Double())


CHILD = Child()


class Spawn(Step[int]):
    async def wait_for(self, context: dex.AsyncContext, input: int) -> Wait:
        return Wait.all_of(SubFlow.run(CHILD, input), SubFlow.run(CHILD, input + 1))

    async def execute(self, context: dex.AsyncContext, input: int) -> StepDecision:
        first = SubFlow.get_condition_results(context, 0)
        second = SubFlow.get_condition_results(context, 1)
        values = [result.completions[0].decode(int) for result in (first, second)]
        return graceful_complete(f"{values}:{SubFlow.get_flow_id(context, 1)}")


class Parent(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Spawn())


class Stall(Step[str]):
    def __init__(self, flow: Slow) -> None:
        self.flow = flow

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(self.flow.never.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete("never")


class Finish(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete(f"finish:{input}:{context.from_step_execution_id}")


class Slow(Flow[str]):
    def __init__(self) -> None:
        self.never = Channel("never", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Stall(self)).other_steps(Finish())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.never)

    async def handle_timeout(self, context: dex.AsyncContext) -> StepDecision:  # type: ignore[override]
        # As on Dex, the handler runs beside the Flow's Steps; it ends the stalled one itself.
        return go_to(Finish, "timed-out").with_canceling_steps(Stall)


class Stepless(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.without_start_step(Finish())

    @rpc
    async def kick(self, context: dex.Context, text: str) -> RPCResult[str]:
        return RPCResult(text, next_steps=(StepMovement.of(Finish, text),))


RUNS: list[str] = []


class Once(Step[str]):
    """Fails the Flow the first time it runs for an input, completes afterwards."""

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        RUNS.append(input)
        if RUNS.count(input) == 1:
            return dex.force_fail(f"first run of {input}")
        return graceful_complete(f"{input}:runs={RUNS.count(input)}")


class Retried(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Once())


FLOWS: list[Flow] = [CHILD, Parent(), Slow(), Stepless(), Retried()]  # type: ignore[type-arg]


async def test_sub_flows_run_and_report_results() -> None:
    parent = FLOWS[1]
    async with serving_client(FLOWS) as client:
        await client.start_flow(parent, "p-1", 20)
        result = await client.wait_for_flow("p-1", timeout=WAIT)
        assert result.status is FlowStatus.COMPLETED
        assert result.completions[0].decode(str) == "[40, 42]:SubFlow:p-1-Spawn-1-1"
        child = await client.wait_for_flow("SubFlow:p-1-Spawn-1-0", timeout=WAIT)
        assert child.completions[0].decode(int) == 40


async def test_flow_timeout_runs_the_handler() -> None:
    slow = FLOWS[2]
    async with serving_client(FLOWS) as client:
        await client.start_flow(
            slow, "t-1", "x", dex.StartFlowOptions(timeout=timedelta(seconds=1))
        )
        result = await client.wait_for_flow("t-1", timeout=WAIT)
        assert result.status is FlowStatus.COMPLETED
        assert result.completions[0].decode(str).startswith("finish:timed-out:")

        options = dex.StartFlowOptions(
            timeout=timedelta(seconds=1), timeout_policy=dex.FlowTimeoutPolicy.FAIL
        )
        await client.start_flow(slow, "t-2", "x", options)
        result = await client.wait_for_flow("t-2", timeout=WAIT)
        assert result.status is FlowStatus.FAILED
        assert result.error_type is dex.FlowErrorType.FLOW_TIMEOUT


async def test_flow_without_start_step_waits_for_an_rpc_and_start_delay_applies() -> None:
    stepless = FLOWS[3]
    async with serving_client(FLOWS) as client:
        await client.start_flow(stepless, "n-1", None)
        assert (await client.describe_flow("n-1")).status is FlowStatus.RUNNING
        assert await client.invoke_rpc(stepless.kick, "n-1", "go") == "go"
        result = await client.wait_for_flow("n-1", timeout=WAIT)
        assert result.completions[0].decode(str) == "finish:go:__rpc/kick"

        delayed = dex.StartFlowOptions(start_delay=timedelta(seconds=1))
        await client.start_flow(FLOWS[0], "d-1", 4, delayed)
        assert (await client.describe_flow("d-1")).status is FlowStatus.RUNNING
        result = await client.wait_for_flow("d-1", timeout=WAIT)
        assert result.completions[0].decode(int) == 8


async def test_flow_retry_policy_restarts_a_failed_flow() -> None:
    retried = FLOWS[4]
    async with serving_client(FLOWS) as client:
        policy = dex.RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=2)
        await client.start_flow(retried, "r-1", "again", dex.StartFlowOptions(retry_policy=policy))
        result = await client.wait_for_flow("r-1", timeout=WAIT)
        assert result.status is FlowStatus.COMPLETED
        assert result.completions[0].decode(str) == "again:runs=2"

        await client.start_flow(retried, "r-2", "never-retried")
        result = await client.wait_for_flow("r-2", timeout=WAIT)
        assert result.status is FlowStatus.FAILED
        assert result.error_message == "first run of never-retried"
