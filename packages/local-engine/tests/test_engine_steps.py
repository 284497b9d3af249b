"""Kernel Step semantics through the real SDK: retries, recovery routes, heartbeats, decisions,
cancellation, locks, Timers and client waits (AsyncClient and AsyncWorker on a real engine)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

import dex
import pytest
from dex import (
    Attribute,
    AttributeMatch,
    Channel,
    Flow,
    FlowStatus,
    PersistenceSchema,
    RetryPolicy,
    RPCResult,
    Step,
    StepDecision,
    StepExecutionId,
    StepList,
    StepMovement,
    StepOptions,
    Timer,
    TimerId,
    Wait,
    dead_end,
    force_complete_if_channels_empty,
    force_fail,
    go_to,
    go_to_many,
    graceful_complete,
    rpc,
)
from engine_kernel_harness import running_engine, sdk_client, sdk_worker, serving_client

WAIT = timedelta(seconds=30)
STEP_WAIT = dex.WaitForStepCompletionOptions()
FAST_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=1.0)

# --------------------------------------------------------------------------- flows


class Flaky(Step[str]):
    """Fails its first two attempts after a heartbeat carrying the attempt number."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(
                initial_interval=timedelta(seconds=1), backoff_coefficient=1.0, maximum_attempts=3
            )
        )

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        previous = context.get_last_heartbeat_value(int)
        await context.heartbeat(context.attempt)
        if context.attempt < 3:
            raise RuntimeError(f"flaky attempt {context.attempt}")
        return graceful_complete(f"{input}:attempt={context.attempt}:previous={previous}")


class Sluggish(Step[str]):
    """Its first attempt stops heartbeating; the heartbeat timeout fails it and a retry runs."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            heartbeat_timeout=timedelta(seconds=1),
            execute_retry=RetryPolicy(
                initial_interval=timedelta(seconds=1), backoff_coefficient=1.0, maximum_attempts=2
            ),
        )

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        await context.heartbeat()
        if context.attempt == 1:
            await asyncio.sleep(30)
        return graceful_complete(f"sluggish:attempt={context.attempt}")


class AlwaysFails(Step[str]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(
                initial_interval=timedelta(seconds=1), backoff_coefficient=1.0, maximum_attempts=2
            )
        ).on_execute_failure_proceed_to(Recover)

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        raise RuntimeError(f"cannot handle {input}")


class Recover(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        error = context.recovery_error
        assert error is not None
        return graceful_complete(
            f"{input}|{context.from_step_execution_id}|{error.error_type}|{error.detail}"
        )


class Failing(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return force_fail(f"rejected {input}")


class Parked(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return dead_end()


class Resumed(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete(f"{input}<-{context.from_step_execution_id}")


class Router(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        flows = {
            "flaky": go_to(Flaky, input),
            "fails": go_to(AlwaysFails, input),
            "fail-flow": go_to(Failing, input),
            "park": go_to(Parked, input),
            "race": go_to_many(StepMovement.of(Forever, input), StepMovement.of(Winner, input)),
            "race-siblings": go_to_many(
                StepMovement.of(Forever, input), StepMovement.of(Winner, input)
            ),
            "empty": go_to(Drain, input),
            "timer": go_to(Sleeper, input),
            "sluggish": go_to(Sluggish, input),
        }
        return flows[input]


class Forever(Step[str]):
    def __init__(self, flow: KernelFlow) -> None:
        self.flow = flow

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(self.flow.never.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete("forever should have been canceled")


class Winner(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        if input == "race-siblings":
            return graceful_complete("sibling-winner").with_canceling_sibling_steps(Forever)
        return graceful_complete("winner").with_canceling_steps(Forever)


class Drain(Step[str]):
    def __init__(self, flow: KernelFlow) -> None:
        self.flow = flow

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return force_complete_if_channels_empty(
            f"drained:{self.flow.seen.get(context)}",
            StepMovement.of(Consume, input),
            self.flow.queue,
        )


class Consume(Step[str]):
    def __init__(self, flow: KernelFlow) -> None:
        self.flow = flow

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(self.flow.queue.at_least(1))

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        seen = self.flow.seen.get(context) + len(self.flow.queue.results(context))
        self.flow.seen.set(context, seen)
        return go_to(Drain, input)


class Sleeper(Step[str]):
    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(hours=1), condition_id="nap"))

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete(f"woke:{context.has_timer_fired(0)}")


class KernelFlow(Flow[str]):
    def __init__(self) -> None:
        self.never = Channel("never", str)
        self.queue = Channel("queue", str)
        self.seen = Attribute("seen", int)
        self.status = Attribute("status", str)
        self.router = Router()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.router).other_steps(
            Flaky(),
            AlwaysFails(),
            Recover(),
            Failing(),
            Parked(),
            Resumed(),
            Forever(self),
            Winner(),
            Drain(self),
            Consume(self),
            Sleeper(),
            Sluggish(),
        )

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.never, self.queue, self.seen, self.status)

    @rpc
    async def resume(self, context: dex.Context, text: str) -> RPCResult[str]:
        self.status.set(context, "resumed")
        return RPCResult("ok", next_steps=(StepMovement.of(Resumed, text),))

    @rpc
    async def enqueue(self, context: dex.Context, count: int) -> RPCResult[int]:
        for index in range(count):
            self.queue.publish(context, f"m{index}")
        return RPCResult(count)

    @rpc
    async def drain(self, context: dex.Context, text: str) -> RPCResult[str]:
        return RPCResult("draining", next_steps=(StepMovement.of(Drain, text),))

    @rpc
    async def explode(self, context: dex.Context, text: str) -> RPCResult[str]:
        raise RuntimeError(f"rpc exploded on {text}")


class Patient(Step[str]):
    """A single attempt with a short heartbeat timeout; it must not count the wait for a Worker."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            heartbeat_timeout=timedelta(seconds=1),
            execute_retry=RetryPolicy(maximum_attempts=1),
        )

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete(f"{input}:attempt={context.attempt}")


class PatientFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Patient())


@dataclass(frozen=True)
class Kernel:
    """A ``KernelFlow`` served by a fresh engine, one SDK Worker and this client."""

    flow: KernelFlow
    client: dex.AsyncClient

    async def run(self, route: str) -> dex.FlowResult:
        """Start the Flow ``k-<route>`` on ``route`` and wait for its result."""
        await self.client.start_flow(self.flow, f"k-{route}", route)
        return await self.client.wait_for_flow(f"k-{route}", timeout=WAIT)


@pytest.fixture
async def kernel() -> AsyncIterator[Kernel]:
    flow = KernelFlow()
    async with serving_client([flow]) as client:
        yield Kernel(flow, client)


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize(
    ("route", "completion"),
    [
        # Retries hand the last heartbeat to the next attempt.
        pytest.param("flaky", "flaky:attempt=3:previous=2", id="retries-hand-on-the-heartbeat"),
        # A heartbeat timeout fails the attempt and a retry runs.
        pytest.param("sluggish", "sluggish:attempt=2", id="heartbeat-timeout-fails-the-attempt"),
    ],
)
async def test_a_failed_attempt_is_retried(kernel: Kernel, route: str, completion: str) -> None:
    result = await kernel.run(route)
    assert result.status is FlowStatus.COMPLETED
    assert result.completions[0].decode(str) == completion


async def test_exhausted_retries_route_to_recovery_with_the_error(kernel: Kernel) -> None:
    result = await kernel.run("fails")
    assert result.status is FlowStatus.COMPLETED
    text = result.completions[0].decode(str)
    origin, from_id, error_type, detail = text.split("|")
    assert (origin, from_id, error_type) == ("fails", "AlwaysFails-1", "builtins.RuntimeError")
    assert detail.startswith("cannot handle fails")
    assert "attempt_progress: NOT_COMPLETED" in detail


async def test_force_fail_fails_the_flow_with_the_reason(kernel: Kernel) -> None:
    result = await kernel.run("fail-flow")
    assert result.status is FlowStatus.FAILED
    assert result.error_type is dex.FlowErrorType.STEP_DECISION_FAILED
    assert result.error_message is not None and "rejected fail-flow" in result.error_message


async def test_dead_end_keeps_the_flow_running_until_an_rpc_adds_work(kernel: Kernel) -> None:
    flow, client = kernel.flow, kernel.client
    await client.start_flow(flow, "k-park", "park")
    await client.wait_for_step_completion("k-park", StepExecutionId("Parked", 1), STEP_WAIT)
    with pytest.raises(dex.LongPollTimeoutError):
        await client.wait_for_flow("k-park", timeout=timedelta(seconds=1))
    assert await client.invoke_rpc(flow.resume, "k-park", "again") == "ok"
    result = await client.wait_for_flow("k-park", timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED
    assert result.completions[0].decode(str) == "again<-__rpc/resume"
    assert result.completions[0].step_execution_id == "Resumed-1"


async def test_canceling_steps_ends_a_waiting_sibling(kernel: Kernel) -> None:
    result = await kernel.run("race")
    assert result.status is FlowStatus.COMPLETED
    assert [c.decode(str) for c in result.completions] == ["winner"]
    result = await kernel.run("race-siblings")
    assert result.status is FlowStatus.COMPLETED
    assert [c.decode(str) for c in result.completions] == ["sibling-winner"]


async def test_force_complete_if_channels_empty_drains_first(kernel: Kernel) -> None:
    flow, client = kernel.flow, kernel.client
    await client.start_flow(flow, "k-drain", "park")
    await client.wait_for_step_completion("k-drain", StepExecutionId("Parked", 1), STEP_WAIT)
    assert await client.invoke_rpc(flow.enqueue, "k-drain", 3) == 3
    assert await client.invoke_rpc(flow.drain, "k-drain", "x") == "draining"
    result = await client.wait_for_flow("k-drain", timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED
    assert [c.decode(str) for c in result.completions] == ["drained:3"]


async def test_stop_flow_cancels_a_running_flow(kernel: Kernel) -> None:
    flow, client = kernel.flow, kernel.client
    await client.start_flow(flow, "k-stop", "park")
    await client.stop_flow("k-stop", dex.StopFlowOptions(reason="enough"))
    result = await client.wait_for_flow("k-stop", timeout=WAIT)
    assert result.status is FlowStatus.CANCELED
    with pytest.raises(dex.FlowNotActiveOrNotFoundError):
        await client.stop_flow("k-stop")


async def test_skip_timer_wakes_a_sleeping_step(kernel: Kernel) -> None:
    flow, client = kernel.flow, kernel.client
    await client.start_flow(flow, "k-timer", "timer")
    for _ in range(100):
        try:
            await client.skip_timer(
                "k-timer", StepExecutionId("Sleeper", 1), TimerId.by_condition_id("nap")
            )
            break
        except dex.DexServiceError:
            await asyncio.sleep(0.1)  # the Step has not started waiting yet
    result = await client.wait_for_flow("k-timer", timeout=WAIT)
    assert result.completions[0].decode(str) == "woke:True"


async def test_failing_rpc_and_unknown_flow_errors_are_typed(kernel: Kernel) -> None:
    flow, client = kernel.flow, kernel.client
    await client.start_flow(flow, "k-rpc", "park")
    with pytest.raises(dex.WorkerInvocationError) as raised:
        await client.invoke_rpc(flow.explode, "k-rpc", "boom")
    assert "rpc exploded on boom" in str(raised.value)
    with pytest.raises(dex.FlowAlreadyStartedError):
        await client.start_flow(flow, "k-rpc", "park")
    waiter = asyncio.create_task(
        client.wait_for_attribute_match(
            "k-rpc",
            flow.status,
            AttributeMatch.equal_to("resumed"),
            dex.WaitForAttributeOptions(),
        )
    )
    await asyncio.sleep(0.2)
    assert not waiter.done()
    assert await client.invoke_rpc(flow.resume, "k-rpc", "go") == "ok"
    assert await waiter == "resumed"
    await client.wait_for_step_completion("k-rpc", StepExecutionId("Resumed", 1), STEP_WAIT)


async def test_start_attributes_and_id_reuse(kernel: Kernel) -> None:
    flow, client = kernel.flow, kernel.client
    options = dex.StartFlowOptions().with_attribute(flow.seen, 5)
    await client.start_flow(flow, "k-reuse", "empty", options)
    result = await client.wait_for_flow("k-reuse", timeout=WAIT)
    assert result.completions[0].decode(str) == "drained:5"
    disallow = dex.StartFlowOptions(id_reuse_policy=dex.IdReusePolicy.DISALLOW)
    with pytest.raises(dex.FlowAlreadyStartedError):
        await client.start_flow(flow, "k-reuse", "empty", disallow)
    # DEFAULT reuses the ID of a closed Flow, as on Dex Server (ALLOW_IF_NOT_RUNNING).
    await client.start_flow(flow, "k-reuse", "empty")
    result = await client.wait_for_flow("k-reuse", timeout=WAIT)
    assert result.completions[0].decode(str) == "drained:0"
    reuse = dex.StartFlowOptions(id_reuse_policy=dex.IdReusePolicy.ALLOW_IF_NOT_RUNNING)
    await client.start_flow(flow, "k-reuse", "empty", reuse)
    result = await client.wait_for_flow("k-reuse", timeout=WAIT)
    assert result.completions[0].decode(str) == "drained:0"


async def test_heartbeat_timeout_does_not_count_the_wait_for_a_worker() -> None:
    flow = PatientFlow()
    async with running_engine() as engine, sdk_client(engine, [flow]) as client:
        await client.start_flow(flow, "k-patient", "patient")
        # No Worker yet: the task waits for one longer than its 1 s heartbeat timeout.
        await asyncio.sleep(2.5)
        async with sdk_worker(engine, [flow]):
            result = await client.wait_for_flow("k-patient", timeout=WAIT)
        assert result.status is FlowStatus.COMPLETED
        assert result.completions[0].decode(str) == "patient:attempt=1"
