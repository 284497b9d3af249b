"""Large values reach Workers as blob references loaded with LoadBlobs (real SDK, real engine).

Every SDK channel receives at most 4 MiB, so a task whose loaded values pass that together only
works when the engine sends them as blobs and pages LoadBlobs under the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    StepList,
    StepMovement,
    StepOptions,
    Wait,
    rpc,
)
from engine_kernel_harness import serving_client

WAIT = timedelta(seconds=60)
MIB = 1024 * 1024


@dataclass(frozen=True)
class Measure:
    count: int
    total_chars: int
    note_chars: int


class Hold(Step[str]):
    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(BigFlow.never.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        return dex.graceful_complete(input)


class Summarize(Step[str]):
    """Loads every pending message of ``inbox`` (several MiB together) and reports their size."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_load_channels=(BigFlow.inbox,))

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        texts = [message.value for message in BigFlow.inbox.pending_messages(context)]
        note = BigFlow.note.get(context) or ""
        # The attempt shows that loading pages of blobs used no retry.
        summary = f"{len(texts)}:{sum(map(len, texts))}:{len(note)}"
        return dex.force_complete(f"attempt={context.attempt}:{summary}")


class BigFlow(Flow[str]):
    inbox = Channel("inbox", str)
    never = Channel("never", str)
    note = Attribute("note", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Hold()).other_steps(Summarize())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.inbox, self.never, self.note)

    @rpc
    async def add(self, context: dex.Context, size: int) -> RPCResult[int]:
        self.inbox.publish(context, "b" * size)
        return RPCResult(size)

    @rpc
    async def add_many(self, context: dex.Context, count: int) -> RPCResult[int]:
        for index in range(count):
            self.inbox.publish(context, f"{index:06d}" + "s" * (20 * 1024))
        return RPCResult(count)

    @rpc
    async def set_note(self, context: dex.Context, size: int) -> RPCResult[int]:
        self.note.set(context, "n" * size)
        return RPCResult(size)

    @rpc(load_channels=[inbox])
    async def measure(self, context: dex.Context) -> RPCResult[Measure]:
        texts = [message.value for message in self.inbox.pending_messages(context)]
        note = self.note.get(context) or ""
        return RPCResult(Measure(len(texts), sum(map(len, texts)), len(note)))

    @rpc
    async def summarize(self, context: dex.Context) -> RPCResult[str]:
        return RPCResult("summarizing", next_steps=(StepMovement.of(Summarize, "go"),))


BIG_CHARS = 4 * (3 * MIB // 2)
SMALL_CHARS = 150 * (6 + 20 * 1024)


async def _fill(client: dex.AsyncClient, flow: BigFlow, flow_id: str) -> None:
    """About 12 MiB of pending values: large ones, many small ones, a large Attribute."""
    await client.start_flow(flow, flow_id, "hold")
    for _ in range(4):
        await client.invoke_rpc(flow.add, flow_id, 3 * MIB // 2)
    await client.invoke_rpc(flow.add_many, flow_id, 150)
    await client.invoke_rpc(flow.set_note, flow_id, 3 * MIB)


async def test_tasks_whose_values_pass_4_mib_reach_the_worker_through_blobs() -> None:
    flow = BigFlow()
    async with serving_client([flow]) as client:
        # A Step loading all of it (several LoadBlobs pages), and the Flow result it produces.
        await _fill(client, flow, "big-step")
        await client.invoke_rpc(flow.summarize, "big-step")
        result = await client.wait_for_flow("big-step", timeout=WAIT)
        assert result.status is FlowStatus.COMPLETED
        assert (
            result.completions[0].decode(str)
            == f"attempt=1:154:{BIG_CHARS + SMALL_CHARS}:{3 * MIB}"
        )
        # An RPC loading all of it (a Worker caches blobs per Flow, so it pages again).
        await _fill(client, flow, "big-rpc")
        measured = await client.invoke_rpc(flow.measure, "big-rpc")
        assert measured == Measure(154, BIG_CHARS + SMALL_CHARS, 3 * MIB)


async def test_a_value_over_the_limit_is_refused_naming_it() -> None:
    flow = BigFlow()
    async with serving_client([flow]) as client:
        await client.start_flow(flow, "big-2", "hold")
        with pytest.raises(dex.DexServiceError) as raised:
            await client.invoke_rpc(flow.set_note, "big-2", 5 * MIB)
        assert "Attribute 'note'" in str(raised.value)
        assert "value limit" in str(raised.value)
        assert await client.invoke_rpc(flow.measure, "big-2") == Measure(0, 0, 0)
