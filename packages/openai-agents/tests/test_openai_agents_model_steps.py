"""The runner's model steps one by one, with committed state only: what each call offers and
returns, handoffs left for after tools, the turn limit, structured output, approvals from the
tool's own ``needs_approval``, compaction's cutoff, and configurations the adapter refuses."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import pytest
from agents import (
    Agent,
    LocalShellTool,
    MaxTurnsExceeded,
    RunConfig,
    RunContextWrapper,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
    function_tool,
    handoff,
    tool_input_guardrail,
    tool_output_guardrail,
)
from agents.items import TResponseOutputItem
from dex_agents import (
    AgentEventWriter,
    AgentFrameworkRunner,
    AgentToolCallStatus,
    ConfigurationError,
    ConfigurationTypeError,
    ContextCompactionRunner,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    NoDeferredToolExecutionError,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolTaskCanceller,
    ToolTaskPoller,
    TurnCompleted,
    UnfinishedTurnMessageBuilder,
    estimate_stored_input_tokens,
    select_turn_boundary_cutoff,
)
from dex_agents_openai_agents import OpenAIAgentsRunner, get_current_deferred_tool_execution
from dex_agents_openai_agents.testing import (
    ModelCallInput,
    ReplyFunctionModel,
    assistant_message,
    function_call,
)
from openai_agents_test_support import TurnDriver
from pydantic import BaseModel

SEEN: list[ModelCallInput] = []


def _model(*responses: Sequence[TResponseOutputItem]) -> ReplyFunctionModel:
    """Answers the n-th call of a turn with ``responses[n]`` and keeps every call's input."""

    async def reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
        SEEN.append(call)
        return responses[call.responses_since_user()]

    return ReplyFunctionModel(reply)


def _always(*output: TResponseOutputItem) -> ReplyFunctionModel:
    """Answers every call with ``output``."""

    async def reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
        SEEN.append(call)
        return output

    return ReplyFunctionModel(reply)


@pytest.fixture(autouse=True)
def _clear_seen() -> None:
    SEEN.clear()


@function_tool
def lookup(topic: str) -> str:
    """Look something up."""
    raise AssertionError("no tool runs inside run_model_step")


async def test_a_response_with_a_handoff_and_a_tool_defers_both_and_switches_after_them() -> None:
    billing = Agent(name="billing", model=_always(assistant_message("billing answers")))
    handed: list[str] = []

    async def on_handoff(context: RunContextWrapper[Any]) -> None:
        handed.append("billing")

    triage = Agent(
        name="triage",
        model=_model(
            [
                function_call("lookup", {"topic": "x"}, call_id="c1"),
                function_call("transfer_to_billing", {}, call_id="h1"),
                function_call("transfer_to_billing", {}, call_id="h2"),
            ]
        ),
        tools=[lookup],
        handoffs=[handoff(billing, on_handoff=on_handoff)],
    )
    driver = TurnDriver(OpenAIAgentsRunner(triage, run_config=RunConfig(tracing_disabled=True)))
    driver.start_turn("my bill is wrong")

    requested = await driver.model_step()

    assert isinstance(requested, ToolCallsRequested)
    assert [call.tool_name for call in requested.tool_calls] == [
        "lookup",
        "transfer_to_billing",
        "transfer_to_billing",
    ]
    # The SDK left the handoff for after the tool; the runner ran it, the first one only.
    assert handed == ["billing"]
    assert json.loads(requested.framework_run_state)["openai_agents_agent"] == "billing"
    references = [json.loads(call.tool_source_reference or "") for call in requested.tool_calls]
    assert references[1]["inline_output"] == '{"assistant": "billing"}'
    assert references[2]["inline_output"] == "Multiple handoffs detected, ignoring this one."
    assert not requested.tool_calls[1].policy.requires_approval

    driver.record(requested, lambda name: (AgentToolCallStatus.SUCCEEDED, f"{name} ok"))
    completed = await driver.model_step()

    assert isinstance(completed, TurnCompleted)
    assert completed.new_messages[-1].text == "billing answers"
    assert [json.loads(m.framework_item)["agent"] for m in completed.new_messages] == [
        "billing"
    ] * 4
    assert len(SEEN) == 2 and "lookup ok" in SEEN[1].tool_outputs_since_user()


async def test_the_turn_limit_fails_the_next_model_call() -> None:
    agent = Agent(
        name="looper",
        model=_model([function_call("lookup", {"topic": "x"}, call_id="c1")]),
        tools=[lookup],
    )
    driver = TurnDriver(OpenAIAgentsRunner(agent, max_turns=1))
    driver.start_turn("loop")
    requested = await driver.model_step()
    assert isinstance(requested, ToolCallsRequested)
    driver.record(requested, lambda name: (AgentToolCallStatus.SUCCEEDED, "x"))

    with pytest.raises(MaxTurnsExceeded, match=r"Max turns \(1\) exceeded"):
        await driver.model_step()
    assert len(SEEN) == 1


class Verdict(BaseModel):
    approved: bool
    reason: str


async def test_structured_output_is_stored_as_the_models_json_text() -> None:
    answer = Verdict(approved=True, reason="in policy").model_dump_json()
    agent = Agent(name="judge", model=_model([assistant_message(answer)]), output_type=Verdict)
    driver = TurnDriver(OpenAIAgentsRunner(agent))
    driver.start_turn("judge this")

    completed = await driver.model_step()

    assert isinstance(completed, TurnCompleted)
    assert Verdict.model_validate_json(completed.new_messages[-1].text or "") == Verdict(
        approved=True, reason="in policy"
    )
    assert SEEN[0].tool_names == ()


async def test_the_tools_own_needs_approval_decides_unless_a_policy_names_it() -> None:
    async def only_big_refunds(
        context: RunContextWrapper[Any], params: dict[str, Any], call_id: str
    ) -> bool:
        return bool(params["amount"] > 100)

    @function_tool(needs_approval=only_big_refunds)
    def refund(amount: int) -> str:
        """Refund an amount."""
        return "refunded"

    @function_tool(needs_approval=True)
    def close_account(account: str) -> str:
        """Close an account."""
        return "closed"

    agent = Agent(
        name="payments",
        model=_model(
            [
                function_call("refund", {"amount": 5}, call_id="small"),
                function_call("refund", {"amount": 500}, call_id="big"),
                function_call("close_account", {"account": "a"}, call_id="close"),
                function_call("lookup", {"topic": "t"}, call_id="read"),
            ]
        ),
        tools=[refund, close_account, lookup],
    )
    driver = TurnDriver(OpenAIAgentsRunner(agent))
    driver.start_turn("refund")
    read_default = dataclasses.replace(driver.context(), default_tool_effect=ToolEffect.READ)

    requested = await driver.runner.run_model_step(read_default)

    assert isinstance(requested, ToolCallsRequested)
    assert {call.tool_call_id: call.policy.requires_approval for call in requested.tool_calls} == {
        "small": False,
        "big": True,
        "close": True,
        "read": False,
    }


async def test_unfinished_turn_messages_give_every_stored_call_its_recorded_result() -> None:
    agent = Agent(
        name="a",
        model=_model(
            [
                function_call("lookup", {"topic": "x"}, call_id="c1"),
                function_call("lookup", {"topic": "y"}, call_id="c2"),
            ]
        ),
        tools=[lookup],
    )
    driver = TurnDriver(OpenAIAgentsRunner(agent))
    driver.start_turn("two")
    requested = await driver.model_step()
    assert isinstance(requested, ToolCallsRequested)
    driver.record(requested, lambda name: (AgentToolCallStatus.FAILED, "index offline"))

    messages = driver.runner.build_unfinished_turn_messages(driver.context())

    assert [(m.tool_call_id, m.tool_output) for m in messages] == [
        ("c1", "Error: index offline"),
        ("c2", "Error: index offline"),
    ]


async def test_a_later_turn_pairs_a_call_left_without_a_result() -> None:
    agent = Agent(
        name="a",
        model=_model(
            [function_call("lookup", {"topic": "x"}, call_id="c1")], [assistant_message("ok")]
        ),
        tools=[lookup],
    )
    driver = TurnDriver(OpenAIAgentsRunner(agent))
    driver.start_turn("first")
    await driver.model_step()  # the turn failed here, before any result was stored
    driver.start_turn("second")

    await driver.model_step()

    items = SEEN[-1].items
    call_index = next(i for i, item in enumerate(items) if item.get("type") == "function_call")
    assert items[call_index + 1]["type"] == "function_call_output"
    assert "outcome of this tool call is unknown" in str(items[call_index + 1]["output"])


def _store_billing_reply(driver: TurnDriver, content: str) -> None:
    """Store a reply of the agent ``billing`` as the next message of the driver's turn."""
    item = {"agent": "billing", "item": {"role": "assistant", "content": content}}
    framework_item = json.dumps(item, separators=(",", ":"))
    driver.turns.store([FrameworkMessage(MessageRole.ASSISTANT, framework_item)])


async def test_compaction_keeps_the_turn_that_names_the_active_agent() -> None:
    billing = Agent(name="billing", model=_always(assistant_message("billing here")))
    triage = Agent(name="triage", model=_model([assistant_message("hi")]), handoffs=[billing])
    runner = OpenAIAgentsRunner(triage)
    driver = TurnDriver(runner)
    driver.start_turn("one")
    driver.start_turn("two")
    _store_billing_reply(driver, "b")
    driver.start_turn("three")
    driver.start_turn("four")
    context = driver.context()

    # With no budget the shared rule cuts after turn 3, which would summarize the only message
    # that names billing; the cut moves to the end of turn 1, keeping turn 2.
    assert select_turn_boundary_cutoff(context, 0) == 4
    assert runner.select_compaction_cutoff(context, 0) == 1
    # Once a kept message names an agent, the shared rule's cut stands.
    _store_billing_reply(driver, "c")
    assert runner.select_compaction_cutoff(driver.context(), 0) == 4
    assert runner.estimate_input_tokens(context) > estimate_stored_input_tokens(context)


def test_configurations_that_cannot_run_durably_are_refused() -> None:
    twin_a, twin_b = Agent(name="twin"), Agent(name="twin")
    with pytest.raises(ConfigurationError, match="two different agents are named 'twin'"):
        OpenAIAgentsRunner(Agent(name="root", handoffs=[twin_a, twin_b]))
    with pytest.raises(ConfigurationError, match="filters or nests the next agent's input"):
        OpenAIAgentsRunner(
            Agent(name="root", handoffs=[handoff(Agent(name="b"), input_filter=lambda data: data)])
        )
    with pytest.raises(ConfigurationError, match="is a LocalShellTool"):
        OpenAIAgentsRunner(Agent(name="root", tools=[LocalShellTool(executor=lambda request: "")]))
    with pytest.raises(ConfigurationError, match="nest_handoff_history"):
        OpenAIAgentsRunner(Agent(name="root"), run_config=RunConfig(nest_handoff_history=True))
    with pytest.raises(ConfigurationError, match="max_turns"):
        OpenAIAgentsRunner(Agent(name="root"), max_turns=0)
    with pytest.raises(ConfigurationTypeError, match=r"agents\.Agent"):
        OpenAIAgentsRunner("not an agent")  # type: ignore[arg-type]


async def test_a_tool_named_like_an_enabled_built_in_tool_fails_the_model_call() -> None:
    @function_tool
    def ask_user(question: str) -> str:
        """Shadows the built-in tool."""
        return ""

    driver = TurnDriver(
        OpenAIAgentsRunner(
            Agent(name="a", model=_model([assistant_message("x")]), tools=[ask_user])
        ),
        enabled_built_in_tools=frozenset({"ask_user"}),
    )
    driver.start_turn("hi")
    with pytest.raises(ConfigurationError, match="uses the name of a built-in tool"):
        await driver.model_step()
    assert SEEN == []


def test_the_key_function_outside_a_tool_step_says_where_to_call_it() -> None:
    with pytest.raises(NoDeferredToolExecutionError, match="no deferred tool call is running"):
        get_current_deferred_tool_execution()


async def test_tool_guardrails_run_around_the_tool_in_its_step() -> None:
    ran: list[str] = []

    @tool_input_guardrail
    def no_admin(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        if "admin" in data.context.tool_arguments:
            return ToolGuardrailFunctionOutput.reject_content("admin accounts are off limits")
        return ToolGuardrailFunctionOutput.allow()

    @tool_output_guardrail
    def no_passwords(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        if "password" in str(data.output):
            return ToolGuardrailFunctionOutput.raise_exception(output_info="leak")
        return ToolGuardrailFunctionOutput.allow()

    @function_tool(tool_input_guardrails=[no_admin], tool_output_guardrails=[no_passwords])
    def read_account(account: str) -> str:
        """Read an account."""
        ran.append(account)
        return f"{account}: password hunter2" if account == "leaky" else f"{account}: ok"

    agent = Agent(
        name="accounts",
        model=_model(
            [
                function_call("read_account", {"account": "admin"}, call_id="a"),
                function_call("read_account", {"account": "leaky"}, call_id="b"),
                function_call("read_account", {"account": "alice"}, call_id="c"),
            ]
        ),
        tools=[read_account],
    )
    runner = OpenAIAgentsRunner(agent)
    driver = TurnDriver(runner)
    driver.start_turn("read them")
    requested = await driver.model_step()
    assert isinstance(requested, ToolCallsRequested)
    driver.record(requested, lambda name: (AgentToolCallStatus.APPROVED, ""))

    async def execute(call_id: str) -> ToolExecutionResult:
        record = driver.records[call_id]
        outcome = await runner.execute_deferred_tool_call(
            DeferredToolExecution(driver.turns.flow_id, record, 1, AgentEventWriter.discarding())
        )
        assert isinstance(outcome, ToolExecutionResult)
        return outcome

    assert (await execute("a")).output == "admin accounts are off limits"
    with pytest.raises(ToolExecutionError, match="tool guardrail no_passwords stopped the result"):
        await execute("b")
    assert (await execute("c")).output == "alice: ok"
    assert ran == ["leaky", "alice"]  # the rejected call never ran


def test_the_runner_offers_every_optional_capability_of_the_contract() -> None:
    runner = OpenAIAgentsRunner(Agent(name="a"))
    for capability in (
        AgentFrameworkRunner,
        UnfinishedTurnMessageBuilder,
        ContextCompactionRunner,
        ToolTaskPoller,
        ToolTaskCanceller,
    ):
        assert isinstance(runner, capability), capability.__name__
    assert runner.supports_plan_mode is True
