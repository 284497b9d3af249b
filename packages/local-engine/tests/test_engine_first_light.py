"""First light: a real SDK AsyncWorker and AsyncClient run a Flow with a Channel wait, an RPC and a
Timer on the local engine, and the engine survives SIGKILL mid-Flow."""

from __future__ import annotations

import asyncio
import signal
from datetime import timedelta

import dex
import pytest
from dex import (
    Attribute,
    Channel,
    Flow,
    FlowStatus,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    Timer,
    Wait,
    go_to,
    graceful_complete,
    rpc,
)
from engine_kernel_harness import reachable, running_engine, sdk_client, sdk_worker, serving_client


class Start(Step[str]):
    def __init__(self, flow: FirstLight) -> None:
        self.flow = flow

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        self.flow.greeting.set(context, input)
        return go_to(AwaitMessage, 2)


class AwaitMessage(Step[int]):
    def __init__(self, flow: FirstLight) -> None:
        self.flow = flow

    async def wait_for(self, context: dex.AsyncContext, input: int) -> Wait:
        return Wait.until(self.flow.inbox.for_n(input))

    async def execute(self, context: dex.AsyncContext, input: int) -> StepDecision:
        messages = list(self.flow.inbox.results(context))
        self.flow.received.set(context, ",".join(messages))
        return go_to(Pause, len(messages))


class Pause(Step[int]):
    def __init__(self, flow: FirstLight) -> None:
        self.flow = flow

    async def wait_for(self, context: dex.AsyncContext, input: int) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=1)))

    async def execute(self, context: dex.AsyncContext, input: int) -> StepDecision:
        assert context.has_timer_fired(0)
        summary = (
            f"{self.flow.greeting.get(context)}|{self.flow.received.get(context)}"
            f"|{self.flow.bumps.get(context)}|{context.from_step_execution_id}"
            f"|{context.step_execution_id}"
        )
        return graceful_complete(summary)


class FirstLight(Flow[str]):
    def __init__(self) -> None:
        self.greeting = Attribute("greeting", str)
        self.received = Attribute("received", str)
        self.bumps = Attribute("bumps", int)
        self.inbox = Channel("inbox", str)
        self.start = Start(self)
        self.await_message = AwaitMessage(self)
        self.pause = Pause(self)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.start).other_steps(self.await_message, self.pause)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.greeting, self.received, self.bumps, self.inbox)

    @rpc
    async def post(self, context: dex.Context, text: str) -> RPCResult[int]:
        self.inbox.publish(context, text)
        count = self.bumps.get(context) + 1
        self.bumps.set(context, count)
        return RPCResult(count)


async def test_channel_rpc_timer_flow_completes() -> None:
    flow = FirstLight()
    async with serving_client([flow]) as client:
        await client.start_flow(flow, "first-light-1", "hello")
        assert await client.invoke_rpc(flow.post, "first-light-1", "a") == 1
        assert await client.invoke_rpc(flow.post, "first-light-1", "b") == 2
        result = await client.wait_for_flow("first-light-1", timeout=timedelta(seconds=30))
        assert result.status is FlowStatus.COMPLETED
        [completion] = result.completions
        assert completion.step_execution_id == "Pause-1"
        assert completion.decode(str) == "hello|a,b|2|AwaitMessage-1|Pause-1"
        info = await client.describe_flow("first-light-1")
        assert info.status is FlowStatus.COMPLETED


async def test_unknown_flow_is_typed_not_found() -> None:
    flow = FirstLight()
    async with running_engine() as engine, sdk_client(engine, [flow]) as client:
        with pytest.raises(dex.FlowNotFoundError):
            await client.describe_flow("no-such-flow")
        with pytest.raises(dex.FlowNotActiveOrNotFoundError):
            await client.invoke_rpc(flow.post, "no-such-flow", "x")


async def test_engine_sigkill_mid_flow_continues() -> None:
    flow = FirstLight()
    async with running_engine() as engine:
        async with sdk_client(engine, [flow]) as client:
            async with sdk_worker(engine, [flow]):
                await client.start_flow(flow, "first-light-kill", "hi")
                assert await client.invoke_rpc(flow.post, "first-light-kill", "x") == 1
                await asyncio.sleep(0.3)
            engine.kill()
            engine.start()
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await reachable(client)
            assert await client.invoke_rpc(flow.post, "first-light-kill", "y") == 2
            result = await client.wait_for_flow("first-light-kill", timeout=timedelta(seconds=30))
            assert result.status is FlowStatus.COMPLETED
            assert result.completions[0].decode(str) == "hi|x,y|2|AwaitMessage-1|Pause-1"


async def test_fsync_durability_and_graceful_sigint_keep_completed_flows() -> None:
    flow = FirstLight()
    async with running_engine("--durability", "fsync") as engine:
        async with sdk_worker(engine, [flow]), sdk_client(engine, [flow]) as client:
            await client.start_flow(flow, "fsync-1", "durable")
            await client.invoke_rpc(flow.post, "fsync-1", "a")
            await client.invoke_rpc(flow.post, "fsync-1", "b")
            result = await client.wait_for_flow("fsync-1", timeout=timedelta(seconds=30))
            assert result.status is FlowStatus.COMPLETED
        assert engine.stop(signal.SIGINT) == 0
        engine.start()
        async with sdk_client(engine, [flow]) as client:
            await reachable(client)
            result = await client.wait_for_flow("fsync-1", timeout=timedelta(seconds=30))
            assert result.completions[0].decode(str) == "durable|a,b|2|AwaitMessage-1|Pause-1"


SLOW_ATTEMPTS: list[int] = []


class SlowStart(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        SLOW_ATTEMPTS.append(context.attempt)
        await asyncio.sleep(0.5)
        return graceful_complete(f"slow:{input}")


class SlowFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(SlowStart())


async def test_sigterm_lets_a_running_attempt_finish_instead_of_losing_it() -> None:
    flow = SlowFlow()
    SLOW_ATTEMPTS.clear()
    async with running_engine() as engine:
        async with sdk_worker(engine, [flow]), sdk_client(engine, [flow]) as client:
            await client.start_flow(flow, "drain-1", "x")
            while not SLOW_ATTEMPTS:
                await asyncio.sleep(0.02)
            assert await asyncio.to_thread(engine.stop) == 0
        engine.start()
        async with sdk_client(engine, [flow]) as client:
            await reachable(client)
            result = await client.wait_for_flow("drain-1", timeout=timedelta(seconds=30))
            assert result.completions[0].decode(str) == "slow:x"
        assert SLOW_ATTEMPTS == [1]
