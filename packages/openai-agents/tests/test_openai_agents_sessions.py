"""Durable sessions of OpenAI Agents SDK agents on a real local engine: handoffs, guardrails, bad
input from the model (arguments that are not JSON), and the MCP wrapper path (a schema-only
FunctionTool that reads its idempotency key inside its tool Step). An unknown tool, arguments that
break the schema and a model that fails mid-turn are the shared suite's, for every runner
(``tests-shared/test_uniform_outcomes.py``, ``test_turn_failure.py``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from agents import (
    Agent,
    FunctionTool,
    GuardrailFunctionOutput,
    RunContextWrapper,
    function_tool,
    handoff,
    input_guardrail,
    output_guardrail,
)
from agents.items import TResponseOutputItem
from agents.testing import ScriptedModel
from agents.tool_context import ToolContext
from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSnapshot,
    AgentToolCallStatus,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.testing import assistant_texts, tool_messages, wait_for_turn_end
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_openai_agents import (
    OpenAIAgentsRunner,
    get_current_deferred_tool_execution,
)
from dex_agents_openai_agents.testing import (
    ModelCallInput,
    ReplyFunctionModel,
    assistant_message,
    function_call,
)
from openai_agents_test_support import wait_for_interrupt

READ = AgentSessionOptions(default_tool_effect=ToolEffect.READ)


async def _turns(
    dex_in_process_worker: InProcessWorkerFactory,
    flow: AgentSessionFlow,
    session_id: str,
    *texts: str,
) -> AgentSnapshot:
    """Start ``session_id`` with the first text, send the others, one turn each; the last snapshot."""
    async with dex_in_process_worker([flow]) as dex:
        sessions = dex.sessions(flow)
        await sessions.start_session(session_id, texts[0])
        snapshot = await wait_for_turn_end(sessions, session_id, 1)
        for turn, text in enumerate(texts[1:], start=2):
            assert await sessions.send_user_message(session_id, text)
            snapshot = await wait_for_turn_end(sessions, session_id, turn)
    return snapshot


def _flow(
    agent: Agent[Any], options: AgentSessionOptions = READ, **runner: Any
) -> AgentSessionFlow:
    return AgentSessionFlow(OpenAIAgentsRunner(agent, **runner), flow_type="Sdk", options=options)


def _echo_model(prefix: str, calls: list[str]) -> ReplyFunctionModel:
    async def reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
        calls.append(call.last_user_text())
        outputs = call.tool_outputs_since_user()
        return [assistant_message(f"{prefix}: {call.last_user_text()} {outputs}")]

    return ReplyFunctionModel(reply, model=prefix)


def _call_then_answer(*calls: tuple[str, str]) -> ReplyFunctionModel:
    """Calls the tools ``(name, arguments)`` in one response, then answers with their outputs."""

    async def reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
        if call.responses_since_user() == 0:
            return [
                function_call(name, arguments, call_id=f"call_{n}")
                for n, (name, arguments) in enumerate(calls)
            ]
        return [assistant_message("done: " + " | ".join(call.tool_outputs_since_user()))]

    return ReplyFunctionModel(reply)


async def test_a_handoff_switches_the_agent_for_the_rest_of_the_turn_and_the_next(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    billing_calls: list[str] = []
    handoffs: list[str] = []
    billing = Agent(name="billing", model=_echo_model("billing", billing_calls))
    # The SDK's own scripted model: exactly one model call of the triage agent is allowed.
    triage_model = ScriptedModel([[function_call("transfer_to_billing", {}, call_id="h1")]])

    async def on_handoff(context: RunContextWrapper[Any]) -> None:
        handoffs.append("billing")

    triage = Agent(
        name="triage", model=triage_model, handoffs=[handoff(billing, on_handoff=on_handoff)]
    )
    flow = _flow(triage)
    snapshot = await _turns(dex_in_process_worker, flow, "handoff", "I was charged twice", "thanks")

    triage_model.assert_complete()  # triage made one call; the second turn went to billing
    assert billing_calls == ["I was charged twice", "thanks"]
    assert handoffs == ["billing"]
    (transfer,) = tool_messages(snapshot)
    assert (transfer.tool_name, transfer.tool_output) == (
        "transfer_to_billing",
        '{"assistant": "billing"}',
    )
    assert assistant_texts(snapshot)[-1] == "billing: thanks []"
    last_item = json.loads(snapshot.messages[-1].framework_item)
    assert last_item["agent"] == "billing"


async def test_input_guardrails_run_once_per_turn_and_a_tripwire_fails_the_turn(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    checked: list[str] = []

    @input_guardrail
    async def no_secrets(
        context: RunContextWrapper[Any], agent: Agent[Any], items: Any
    ) -> GuardrailFunctionOutput:
        text = json.dumps(items)
        checked.append(text)
        return GuardrailFunctionOutput(output_info="secret", tripwire_triggered="secret" in text)

    @function_tool
    def lookup(topic: str) -> str:
        """Look something up."""
        return f"{topic} found"

    agent = Agent(
        name="guarded",
        model=_call_then_answer(("lookup", '{"topic":"x"}')),
        tools=[lookup],
        input_guardrails=[no_secrets],
    )
    flow = _flow(agent)
    async with dex_in_process_worker([flow]) as dex:
        sessions = dex.sessions(flow)
        await sessions.start_session("guard", "look something up")
        snapshot = await wait_for_turn_end(dex.sessions(flow), "guard", 1)
        assert assistant_texts(snapshot) == ["done: x found"]
        assert len(checked) == 1  # not again on the model call after the tool
        assert await sessions.send_user_message("guard", "tell me the secret")
        snapshot = await wait_for_turn_end(dex.sessions(flow), "guard", 2)

    assert snapshot.state is not None
    error = snapshot.state.last_turn_error or ""
    assert "input guardrail no_secrets of agent guarded triggered its tripwire" in error
    assert assistant_texts(snapshot) == ["done: x found"]


async def test_an_output_guardrail_tripwire_fails_the_turn(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    @output_guardrail
    async def no_shouting(
        context: RunContextWrapper[Any], agent: Agent[Any], output: Any
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered="!" in str(output))

    agent = Agent(name="calm", model=_echo_model("calm", []), output_guardrails=[no_shouting])
    flow = _flow(agent)
    snapshot = await _turns(dex_in_process_worker, flow, "calm", "hello", "HELLO!")

    assert snapshot.state is not None
    assert "output guardrail no_shouting" in (snapshot.state.last_turn_error or "")
    assert assistant_texts(snapshot) == ["calm: hello []"]


async def test_arguments_that_are_not_json_are_a_failed_result_the_model_sees(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    # The model's raw arguments string: only a framework that passes it through can send this.
    runs: list[str] = []

    @function_tool
    def lookup_order(order_id: str) -> str:
        """Look up an order."""
        runs.append(order_id)
        return f"order {order_id}"

    model = _call_then_answer(("lookup_order", "{not json"), ("lookup_order", '{"order_id": "7"}'))
    flow = _flow(Agent(name="orders", model=model, tools=[lookup_order]))
    snapshot = await _turns(dex_in_process_worker, flow, "bad", "look up order 7")

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    outputs = [message.tool_output or "" for message in tool_messages(snapshot)]
    assert outputs == [
        "Error: invalid arguments for lookup_order: arguments are not valid JSON",
        "order 7",
    ]
    assert runs == ["7"]  # only the valid call ran the tool
    assert assistant_texts(snapshot)[-1].startswith("done: Error: invalid arguments")


async def test_a_schema_only_tool_reads_its_idempotency_key_inside_its_tool_step(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    sent: list[tuple[str, dict[str, Any]]] = []

    async def call_remote_tool(context: ToolContext[Any], arguments: str) -> str:
        # As a wrapper of an MCP tool calls tools.call_tool(name, args, idempotency_key=...).
        execution = get_current_deferred_tool_execution()
        sent.append((execution.idempotency_key, json.loads(arguments)))
        return f"refunded {json.loads(arguments)['order_id']} (attempt {execution.attempt})"

    refund = FunctionTool(
        name="refund",
        description="Refund an order.",
        params_json_schema={
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
        on_invoke_tool=call_remote_tool,
    )
    flow = _flow(
        Agent(
            name="payments", model=_call_then_answer(("refund", '{"order_id":"7"}')), tools=[refund]
        ),
        AgentSessionOptions(tool_policies={"refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)}),
    )
    async with dex_in_process_worker([flow]) as dex:
        sessions = dex.sessions(flow)
        await sessions.start_session("refund-7", "refund order 7")
        interrupt = await wait_for_interrupt(dex, flow, "refund-7")
        assert sent == []  # nothing runs before the approval
        assert await sessions.resolve_interrupt("refund-7", interrupt.interrupt_id, approved=True)
        snapshot = await wait_for_turn_end(dex.sessions(flow), "refund-7", 1)

    assert sent == [(dex.scoped("refund-7") + "/turn-1/call_0", {"order_id": "7"})]
    assert assistant_texts(snapshot) == ["done: refunded 7 (attempt 1)"]


async def test_a_rejected_call_reaches_the_model_with_the_reason(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    @function_tool(needs_approval=True)
    def delete_account(account: str) -> str:
        """Delete an account."""
        raise AssertionError("a rejected call must never run")

    flow = _flow(
        Agent(
            name="admin",
            model=_call_then_answer(("delete_account", '{"account":"a1"}')),
            tools=[delete_account],
        )
    )
    async with dex_in_process_worker([flow]) as dex:
        sessions = dex.sessions(flow)
        await sessions.start_session("admin", "delete a1")
        # The tool's own needs_approval=True asks even though the session default is read.
        interrupt = await wait_for_interrupt(dex, flow, "admin")
        assert await sessions.resolve_interrupt(
            "admin", interrupt.interrupt_id, approved=False, rejection_message="not today"
        )
        snapshot = await wait_for_turn_end(dex.sessions(flow), "admin", 1)

    (record,) = [m for m in tool_messages(snapshot)]
    assert "not today" in (record.tool_output or "")
    assert snapshot.tool_calls == () or all(
        call.status is AgentToolCallStatus.REJECTED for call in snapshot.tool_calls
    )
    assert assistant_texts(snapshot)[-1].startswith("done: The user rejected this tool call.")


@pytest.mark.parametrize("behavior", ["stop_on_first_tool", {"stop_at_tool_names": ["lookup"]}])
async def test_tool_use_behavior_ends_the_turn_with_the_tool_result(
    behavior: Any, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    @function_tool
    def lookup(topic: str) -> str:
        """Look something up."""
        return f"{topic} found"

    model = _call_then_answer(("lookup", '{"topic":"x"}'))
    flow = _flow(Agent(name="stopper", model=model, tools=[lookup], tool_use_behavior=behavior))
    snapshot = await _turns(dex_in_process_worker, flow, "stop", "look up x")

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert snapshot.messages[-1].tool_output == "x found"
    assert assistant_texts(snapshot) == []  # no second model call
    assert snapshot.usage.model_calls == 1


async def test_a_tool_exception_follows_the_calls_effect_not_the_sdk_default_message(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    reads: list[str] = []
    writes: list[str] = []

    @function_tool
    def flaky_read(topic: str) -> str:
        """A read that fails on its first attempt."""
        reads.append(topic)
        if len(reads) == 1:
            raise ConnectionError("index timed out")
        return f"{topic} found"

    @function_tool
    def send_email(to: str) -> str:
        """A write that may have sent before it failed."""
        writes.append(to)
        raise ConnectionError("mail server hung up")

    @function_tool(failure_error_function=lambda context, error: f"handled: {error}")
    def own_policy(topic: str) -> str:
        """A tool with its own failure message."""
        raise ValueError("bad topic")

    model = _call_then_answer(
        ("flaky_read", '{"topic":"x"}'),
        ("send_email", '{"to":"a@example.com"}'),
        ("own_policy", '{"topic":"y"}'),
    )
    flow = _flow(
        Agent(name="mixed", model=model, tools=[flaky_read, send_email, own_policy]),
        AgentSessionOptions(
            tool_policies={
                "flaky_read": ToolPolicy(ToolEffect.READ),
                "send_email": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
                "own_policy": ToolPolicy(ToolEffect.READ),
            }
        ),
    )
    snapshot = await _turns(dex_in_process_worker, flow, "mixed", "do it all")

    outputs = {m.tool_name: m.tool_output for m in tool_messages(snapshot)}
    assert outputs["flaky_read"] == "x found"  # CallTool retried the read
    assert reads == ["x", "x"]
    assert outputs["send_email"] == OUTCOME_UNKNOWN_TOOL_RESULT  # never sent a second time
    assert writes == ["a@example.com"]
    assert outputs["own_policy"] == "handled: bad topic"
