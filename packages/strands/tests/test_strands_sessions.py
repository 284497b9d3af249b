"""Strands specifics in real sessions against the local engine: the transcript across turns,
Strands' own human-in-the-loop idioms (a ``BeforeToolCallEvent`` hook's interrupt and
``cancel_tool``, a tool's ``tool_context.interrupt``), the idempotency key in the tool, a model per
session settings, and bad input."""

from __future__ import annotations

from typing import Any

import pytest
from dex_agents import (
    AgentSessionOptions,
    AgentToolCallStatus,
    ConfigurationTypeError,
    InterruptKind,
    ToolEffect,
    ToolPolicy,
    TurnStatus,
)
from dex_agents.exceptions import StoredStateError
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_strands import IDEMPOTENCY_KEY_STATE, StrandsRunner, strands_session_flow
from dex_agents_strands._model_step import call_model
from dex_agents_strands._transcript import decode_messages, encode_message
from dex_agents_strands.testing import (
    ModelCall,
    ScriptedModel,
    reference_agent,
    text_reply,
    tool_use_reply,
)
from strands import Agent, ToolContext, tool
from strands.hooks import BeforeToolCallEvent, HookProvider, HookRegistry
from strands.types.content import Message

READ = ToolPolicy(ToolEffect.READ)


def _script(call: ModelCall) -> Message:
    """Call the tool named by the user text once, then answer with the turn's tool outputs."""
    outputs = call.tool_outputs()
    name = call.last_user_text().split()[0]
    if not outputs and name != "chat":
        return tool_use_reply(f"use-{len(call.user_texts())}", name, {"order_id": "7"})
    return text_reply(f"{call.last_user_text()} -> {' | '.join(outputs) or 'no tools'}")


class ApproveDeletes(HookProvider):
    """Strands' approval idiom: interrupt before ``delete_order``, cancel unless approved."""

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self.approve)

    def approve(self, event: BeforeToolCallEvent) -> None:
        if event.tool_use["name"] != "delete_order":
            return
        answer = event.interrupt(
            "approve-delete", reason={"question": "Delete it?", "choices": ["y", "n"]}
        )
        if answer != "y":
            event.cancel_tool = "the person did not approve the delete"


def _agent(ran: list[str]) -> Agent:
    @tool(context=True)
    def lookup_order(order_id: str, tool_context: ToolContext) -> str:
        """Look up an order.

        Args:
            order_id: The order.
        """
        ran.append(f"lookup {order_id}")
        return (
            f"order {order_id} shipped (key {tool_context.invocation_state[IDEMPOTENCY_KEY_STATE]})"
        )

    @tool
    def delete_order(order_id: str) -> str:
        """Delete an order.

        Args:
            order_id: The order.
        """
        ran.append(f"delete {order_id}")
        return f"deleted {order_id}"

    @tool(context=True)
    def ship_order(order_id: str, tool_context: ToolContext) -> str:
        """Ship an order after asking where to.

        Args:
            order_id: The order.
        """
        address = tool_context.interrupt("address", reason="Ship to which address?")
        ran.append(f"ship {order_id} to {address}")
        return f"shipping {order_id} to {address}"

    return reference_agent(
        _script,
        [lookup_order, delete_order, ship_order],
        hooks=[ApproveDeletes()],
        system_prompt="You help with orders.",
    )


async def test_tools_hooks_and_interrupts_run_in_their_tool_steps(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    ran: list[str] = []
    policies = {
        "lookup_order": READ,
        "delete_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
        "ship_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
    }
    flow = strands_session_flow(
        _agent(ran), "StrandsOrders", AgentSessionOptions(tool_policies=policies)
    )
    async with dex_in_process_worker([flow]) as worker:
        sessions = worker.sessions(flow)
        first = await sessions.run_turn("s1", "lookup_order please")
        second = await sessions.run_turn("s1", "chat again")
        asked = await sessions.run_turn("s1", "delete_order now")
        (approval,) = asked.pending_interrupts
        assert asked.status is TurnStatus.WAITING_FOR_PERSON
        assert (approval.kind, approval.question, approval.choices) == (
            InterruptKind.QUESTION,
            "Delete it?",
            ("y", "n"),
        )
        await sessions.answer_question("s1", approval.interrupt_id, "n")
        denied = await sessions.wait_for_turn("s1", asked)
        shipping = await sessions.run_turn("s1", "ship_order today")
        (question,) = shipping.pending_interrupts
        assert question.question == "Ship to which address?"
        await sessions.answer_question("s1", question.interrupt_id, "Main St 1")
        shipped = await sessions.wait_for_turn("s1", shipping)
        snapshot = await sessions.get_agent_snapshot("s1")
        session_id = worker.scoped("s1")

    assert first.text == f"lookup_order please -> order 7 shipped (key {session_id}/turn-1/use-1)"
    # The second turn's model call read the first turn's messages back from storage.
    assert second.text == "chat again -> no tools"
    assert denied.status is TurnStatus.COMPLETED
    assert denied.tool_calls[0].status is AgentToolCallStatus.FAILED
    assert denied.text == "delete_order now -> Error: the person did not approve the delete"
    assert shipped.text == "ship_order today -> shipping 7 to Main St 1"
    # Each tool ran once for real: the denied delete never, the interrupted ship once answered.
    assert ran == ["lookup 7", "ship 7 to Main St 1"]
    stored = decode_messages(snapshot.messages)
    assert [m["role"] for m in stored[:3]] == ["user", "assistant", "user"]
    assert stored[1]["content"][0]["toolUse"]["name"] == "lookup_order"


async def test_the_model_follows_the_session_settings(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    def model_for(settings: Any) -> ScriptedModel:
        return ScriptedModel(lambda call: text_reply(f"model {settings.get('model', 'default')}"))

    agent = reference_agent(lambda call: text_reply("agent's"))
    flow = strands_session_flow(agent, "StrandsSettings", resolve_model=model_for)
    async with dex_in_process_worker([flow]) as worker:
        sessions = worker.sessions(flow)
        await sessions.start_session("s1", "hi", session_settings={"model": "small"})
        result = await sessions.wait_for_turn(
            "s1", await sessions.latest_event_token("s1"), turn_id="turn-1"
        )
    assert result.text == "model small"


def test_bad_input_is_refused_with_a_clear_error() -> None:
    with pytest.raises(ConfigurationTypeError, match=r"needs a strands\.Agent"):
        StrandsRunner(object())  # type: ignore[arg-type]
    with pytest.raises(StoredStateError, match="not a Strands message"):
        decode_messages([encode_message(text_reply("ok"))[0].__class__("user", "[1]")])


async def test_a_model_editing_its_messages_leaves_the_history_as_stored() -> None:
    # Each stored item is parsed once per process and every read shares it; a model call hands
    # the history to Strands' stream_messages, which copies it before the model edits it (a
    # model or a provider may truncate a tool result in place).
    stored = [
        *encode_message(tool_use_reply("c1", "lookup_order", {"order_id": "7"})),
        *encode_message(
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "c1",
                            "status": "success",
                            "content": [{"text": "ok"}],
                        }
                    }
                ],
            }
        ),
    ]

    def edit_then_answer(call: ModelCall) -> Message:
        call.messages[0]["content"][0]["toolUse"]["input"]["order_id"] = "8"
        call.messages[1]["content"][0]["toolResult"]["content"][0]["text"] = "truncated"
        call.messages[1]["content"].append({"text": "added"})
        return text_reply("done")

    first = decode_messages(stored)
    await call_model(ScriptedModel(edit_then_answer), None, first, [])
    second = decode_messages(stored)
    assert second[0]["content"][0]["toolUse"]["input"] == {"order_id": "7"}
    assert second[1]["content"] == [
        {"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": "ok"}]}}
    ]
