"""Real LangGraph agents as durable sessions: both prebuilt agent factories and a hand-built
StateGraph, against the local engine with an in-process Worker. What every runner must do (a
rejected write never runs, and so on) is the shared suite's (``tests-shared``)."""

from __future__ import annotations

import json
import operator
import warnings
from typing import Annotated

from dex_agents import (
    AgentSessionOptions,
    BuiltInTool,
    MessageRole,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.testing import wait_for_turn_end
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_langgraph import ScriptedChatModel, langgraph_session_flow, model_tools
from dex_agents_langgraph.testing import turn_messages
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolCall, messages_from_dict
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, create_react_agent, tools_condition
from langgraph_test_support import (
    call_tools_then_answer,
    local_sessions,
    texts_of,
    tool_results,
    wait_for_interrupt,
)
from typing_extensions import TypedDict

LOOKUPS: list[str] = []


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    LOOKUPS.append(order_id)
    return f"order {order_id} is shipped"


READ_POLICIES = {"lookup_order": ToolPolicy(ToolEffect.READ)}
TWO_LOOKUPS = call_tools_then_answer(
    ToolCall(name="lookup_order", args={"order_id": "7"}, id="call_a"),
    ToolCall(name="lookup_order", args={"order_id": "8"}, id="call_b"),
)


def _react_agent(model: ScriptedChatModel) -> object:
    with warnings.catch_warnings():
        # Deprecated in LangGraph 1.x in favour of create_agent, and still widely used.
        warnings.simplefilter("ignore")
        return create_react_agent(model, [lookup_order], prompt="You help with orders.")


async def _run_two_lookups(dex_in_process_worker: InProcessWorkerFactory, graph: object) -> None:
    LOOKUPS.clear()
    flow = langgraph_session_flow(
        graph, flow_type="Orders", options=AgentSessionOptions(tool_policies=READ_POLICIES)
    )
    async with local_sessions(dex_in_process_worker, [flow]) as dex:
        await dex["Orders"].start_session("s1", "Where are orders 7 and 8?")
        snapshot = await wait_for_turn_end(dex["Orders"], "s1")
        # The model reuses its tool call IDs in the next turn, as models do.
        assert await dex["Orders"].send_user_message("s1", "And now?")
        second = await wait_for_turn_end(dex["Orders"], "s1", turns=2)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert texts_of(snapshot, MessageRole.ASSISTANT) == [
        "done: order 7 is shipped; order 8 is shipped"
    ]
    # Every stored message is LangChain message JSON that LangChain reads back as it was.
    restored = messages_from_dict([json.loads(m.framework_item) for m in snapshot.messages])
    assert [m.type for m in restored] == ["human", "ai", "tool", "tool", "ai"]
    assert isinstance(restored[1], AIMessage)
    assert [call["id"] for call in restored[1].tool_calls] == ["call_a", "call_b"]
    assert snapshot.usage.model_calls == 2
    assert second.state is not None and second.state.last_turn_error is None
    assert (
        texts_of(second, MessageRole.ASSISTANT)[-1] == texts_of(snapshot, MessageRole.ASSISTANT)[0]
    )
    assert sorted(LOOKUPS) == ["7", "7", "8", "8"]  # each call ran once per turn, in its own Step


async def test_create_react_agent_runs_each_tool_call_in_its_own_step(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    model = ScriptedChatModel(respond=TWO_LOOKUPS)
    await _run_two_lookups(dex_in_process_worker, _react_agent(model))
    # The prompt reached the model on both calls; it is the graph's, so it is never stored.
    assert [call[0].text for call in model.calls] == ["You help with orders."] * 4


async def test_langchain_create_agent_runs_each_tool_call_in_its_own_step(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    model = ScriptedChatModel(respond=TWO_LOOKUPS)
    await _run_two_lookups(dex_in_process_worker, create_agent(model, [lookup_order]))
    assert len(model.calls) == 4


class CountingState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    model_calls: Annotated[int, operator.add]


def _counting_graph(model: ScriptedChatModel) -> object:
    """A hand-built agent with a state channel of its own beside the messages."""

    async def call_model(state: CountingState) -> dict[str, object]:
        bound = model.bind_tools(model_tools([lookup_order]))
        return {"messages": [await bound.ainvoke(state["messages"])], "model_calls": 1}

    builder = StateGraph(CountingState)
    builder.add_node("agent", call_model)
    builder.add_node("run_tools", ToolNode([lookup_order]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "run_tools", END: END})
    builder.add_edge("run_tools", "agent")
    return builder.compile()


async def test_a_state_graph_keeps_its_own_channels_across_the_tool_steps(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    def respond(messages: list[BaseMessage]) -> AIMessage:
        done = tool_results(messages)
        if len(done) < 2:
            order = str(7 + len(done))
            call = ToolCall(name="lookup_order", args={"order_id": order}, id=f"c{len(done)}")
            return AIMessage(content="", tool_calls=[call])
        return AIMessage(content="; ".join(done))

    model = ScriptedChatModel(respond=respond)
    flow = langgraph_session_flow(
        _counting_graph(model),
        flow_type="Counting",
        options=AgentSessionOptions(tool_policies=READ_POLICIES),
    )
    runner = flow.runner
    async with local_sessions(dex_in_process_worker, [flow]) as dex:
        await dex["Counting"].start_session("s1", "Look up two orders, one after the other.")
        snapshot = await wait_for_turn_end(dex["Counting"], "s1")

    assert texts_of(snapshot, MessageRole.ASSISTANT) == ["order 7 is shipped; order 8 is shipped"]
    # The tool node has its own name; the runner found it because it is a ToolNode.
    assert runner.tool_names == ("lookup_order",)  # type: ignore[attr-defined]
    assert len(model.calls) == 3


async def test_model_tools_offers_the_enabled_built_ins_and_plan_mode_only_write_todos(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    def respond(messages: list[BaseMessage]) -> AIMessage:
        text = messages[-1].text if not turn_messages(messages) else ""
        if "ask" in text:
            question = {"question": "Which region?", "choices": ["eu", "us"]}
            return AIMessage(
                content="", tool_calls=[ToolCall(name="ask_user", args=question, id="q1")]
            )
        return AIMessage(content="answered: " + "; ".join(tool_results(messages)))

    model = ScriptedChatModel(respond=respond)
    options = AgentSessionOptions(
        tool_policies=READ_POLICIES,
        built_in_tools=frozenset({BuiltInTool.ASK_USER, BuiltInTool.WRITE_TODOS}),
        plan_mode_enabled=True,
    )
    flow = langgraph_session_flow(_counting_graph(model), flow_type="Asking", options=options)
    async with local_sessions(dex_in_process_worker, [flow]) as dex:
        sessions = dex["Asking"]
        await sessions.start_session("s1", "please ask me")
        interrupt = await wait_for_interrupt(sessions, "s1")
        assert await sessions.answer_question("s1", interrupt.interrupt_id, "eu")
        snapshot = await wait_for_turn_end(sessions, "s1")
        assert await sessions.send_user_message("s1", "plan it", plan_mode=True)
        await wait_for_turn_end(sessions, "s1", turns=2)

    assert texts_of(snapshot, MessageRole.ASSISTANT) == [
        'answered: {"status":"answered","answer":"eu"}'
    ]
    assert model.offered_tools[0] == ["lookup_order", "ask_user", "write_todos"]
    assert model.offered_tools[-1] == ["write_todos"]  # the planning turn
