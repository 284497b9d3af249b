"""RPC writes through the real SDK: Channel message deletions, transactional and not."""

from __future__ import annotations

from dataclasses import dataclass

import dex
import pytest
from dex import Attribute, Channel, Flow, PersistenceSchema, RPCResult, Step, StepList, Wait, rpc
from engine_kernel_harness import serving_client


@dataclass(frozen=True)
class InboxView:
    note: str | None
    texts: list[str]
    ids: list[str]


class Idle(Step[str]):
    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(InboxFlow.never.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        return dex.graceful_complete(input)


class InboxFlow(Flow[str]):
    inbox = Channel("inbox", str)
    never = Channel("never", str)
    note = Attribute("note", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Idle())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.inbox, self.never, self.note)

    @rpc
    async def add(self, context: dex.Context, text: str) -> RPCResult[str]:
        self.inbox.publish(context, text)
        return RPCResult(text)

    @rpc(is_transactional=True)
    async def forget(self, context: dex.Context, message_id: str) -> RPCResult[str]:
        self._forget(context, message_id)
        return RPCResult("forgot")

    @rpc
    async def forget_loosely(self, context: dex.Context, message_id: str) -> RPCResult[str]:
        self._forget(context, message_id)
        return RPCResult("forgot")

    @rpc(load_channels=[inbox])
    async def peek(self, context: dex.Context) -> RPCResult[InboxView]:
        texts = [message.value for message in self.inbox.pending_messages(context)]
        ids = [message.message_id for message in self.inbox.pending_messages(context)]
        return RPCResult(InboxView(self.note.get(context), texts, ids))

    def _forget(self, context: dex.Context, message_id: str) -> None:
        self.note.set(context, f"forgot {message_id}")
        self.inbox.publish(context, "extra")
        self.inbox.delete(context, message_id)


async def test_a_transactional_rpc_deleting_a_missing_message_fails_and_applies_nothing() -> None:
    flow = InboxFlow()
    async with serving_client([flow]) as client:
        await client.start_flow(flow, "inbox-1", "idle")
        await client.invoke_rpc(flow.add, "inbox-1", "a")
        before = await client.invoke_rpc(flow.peek, "inbox-1")
        assert before.texts == ["a"] and before.note is None

        with pytest.raises(dex.ChannelMessageNotFoundError):
            await client.invoke_rpc(flow.forget, "inbox-1", "no-such-message")
        assert await client.invoke_rpc(flow.peek, "inbox-1") == before

        (existing,) = before.ids
        assert await client.invoke_rpc(flow.forget, "inbox-1", existing) == "forgot"
        after = await client.invoke_rpc(flow.peek, "inbox-1")
        assert after.texts == ["extra"] and after.note == f"forgot {existing}"


async def test_a_non_transactional_rpc_skips_a_missing_message_and_applies_its_other_writes() -> (
    None
):
    flow = InboxFlow()
    async with serving_client([flow]) as client:
        await client.start_flow(flow, "inbox-2", "idle")
        await client.invoke_rpc(flow.add, "inbox-2", "a")
        assert await client.invoke_rpc(flow.forget_loosely, "inbox-2", "gone") == "forgot"
        after = await client.invoke_rpc(flow.peek, "inbox-2")
        assert after.texts == ["a", "extra"] and after.note == "forgot gone"
