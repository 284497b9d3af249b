"""Bad input ends in the seed's outcomes, never a stuck session: arguments that are not JSON, a
second model call in one RunModel, and configurations the runner refuses. An unknown tool,
schema-breaking arguments and a model that fails mid-turn are the shared suite's, for every runner
(``tests-shared/test_uniform_outcomes.py``, ``test_turn_failure.py``)."""

from __future__ import annotations

import pytest
from dex_agents import (
    AgentSessionOptions,
    CompactionPolicy,
    ConfigurationError,
    ConfigurationTypeError,
    MessageRole,
    NoDeferredToolExecutionError,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.testing import wait_for_turn_end
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_langgraph import (
    LangGraphRunner,
    ScriptedChatModel,
    get_tool_call_idempotency_key,
    langgraph_session_flow,
)
from dex_agents_langgraph.testing import turn_messages
from langchain_core.messages import AIMessage, BaseMessage, ToolCall
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph_test_support import (
    first_turn,
    local_sessions,
    texts_of,
    tool_results,
)

RUNS: list[int] = []


@tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    RUNS.append(a + b)
    return str(a + b)


def _compiled(
    model: ScriptedChatModel, *, second_model_node: bool = False, checkpointer: object = None
) -> object:
    async def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await model.bind_tools([add]).ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode([add]))
    builder.add_edge(START, "model")
    if second_model_node:
        # A "reviewer" model node right after the first: two model calls with no tool between.
        builder.add_node("review", call_model)
        builder.add_edge("model", "review")
        builder.add_conditional_edges("review", tools_condition, ["tools", END])
    else:
        builder.add_conditional_edges("model", tools_condition, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)  # type: ignore[arg-type]


def _first_then_echo(first: AIMessage) -> ScriptedChatModel:
    def respond(messages: list[BaseMessage]) -> AIMessage:
        if not any(isinstance(m, AIMessage) for m in turn_messages(messages)):
            return first
        return AIMessage(content="seen: " + " | ".join(tool_results(messages)))

    return ScriptedChatModel(respond=respond)


OPTIONS = AgentSessionOptions(tool_policies={"add": ToolPolicy(ToolEffect.READ)})


async def _one_turn(
    dex_in_process_worker: InProcessWorkerFactory, graph: object, text: str = "go"
) -> list[str]:
    flow = langgraph_session_flow(graph, flow_type="Bad", options=OPTIONS)
    async with local_sessions(dex_in_process_worker, [flow]) as dex:
        await dex["Bad"].start_session("s1", text)
        snapshot = await wait_for_turn_end(dex["Bad"], "s1")
    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    return texts_of(snapshot, MessageRole.TOOL)


async def test_arguments_that_are_not_json_are_a_failed_result(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    RUNS.clear()
    first = AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "name": "add",
                "args": '{"a": 1, "b":',
                "id": "c1",
                "error": None,
                "type": "invalid_tool_call",
            }
        ],
        tool_calls=[ToolCall(name="add", args={"a": 1, "b": 2}, id="c2")],
    )
    results = await _one_turn(dex_in_process_worker, _compiled(_first_then_echo(first)))

    assert RUNS == [3]
    # LangChain keeps parsed and unparsable calls apart; the parsed ones come first.
    assert results == ["3", "Error: invalid arguments for add: arguments are not valid JSON"]


async def test_a_second_model_call_in_one_run_model_fails_the_turn_clearly(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    model = ScriptedChatModel(respond=lambda messages: AIMessage(content="hello"))
    flow = langgraph_session_flow(
        _compiled(model, second_model_node=True), flow_type="Bad", options=OPTIONS
    )
    async with local_sessions(dex_in_process_worker, [flow]) as dex:
        await dex["Bad"].start_session("s1", "go")
        snapshot = await wait_for_turn_end(dex["Bad"], "s1")

    assert snapshot.state is not None
    error = snapshot.state.last_turn_error or ""
    assert "second model call in one RunModel (node 'review', after node 'model')" in error
    # Each attempt stopped before the second call reached the model.
    assert len(model.calls) == 3


def test_the_runner_refuses_what_it_cannot_run() -> None:
    model = ScriptedChatModel(respond=lambda messages: AIMessage(content="hi"))
    with pytest.raises(ConfigurationTypeError, match="needs a compiled graph"):
        LangGraphRunner(StateGraph(MessagesState))
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode([add]))
    builder.add_edge(START, "tools")
    with pytest.raises(ConfigurationError, match="interrupt_before/interrupt_after"):
        LangGraphRunner(builder.compile(interrupt_before=["tools"]))
    with pytest.raises(ConfigurationError, match="no 'conversation' state channel"):
        LangGraphRunner(_compiled(model), messages_key="conversation")
    with pytest.raises(ConfigurationError, match="tool node 'run' is not a node"):
        LangGraphRunner(_compiled(model), tool_nodes=["run"])
    with pytest.raises(ConfigurationTypeError, match="node 'model' runs"):
        LangGraphRunner(_compiled(model), tool_nodes=["model"])
    with pytest.raises(ConfigurationError, match="names tool 'report'"):
        LangGraphRunner(_compiled(model), tool_task_pollers={"report": object()})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match="needs a summary_model"):
        langgraph_session_flow(
            _compiled(model),
            flow_type="Compacting",
            options=AgentSessionOptions(compaction=CompactionPolicy(context_window_tokens=10_000)),
        )
    with pytest.raises(NoDeferredToolExecutionError, match="outside a tool Step"):
        get_tool_call_idempotency_key()


async def test_a_checkpointer_is_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedChatModel(respond=lambda messages: AIMessage(content="hi"))
    saver = InMemorySaver()
    with caplog.at_level("WARNING", logger="dex_agents_langgraph"):
        runner = LangGraphRunner(_compiled(model, checkpointer=saver))
    assert "never reads or writes yours" in caplog.text

    completed = await runner.run_model_step(first_turn(runner, "hello"))

    assert [m.text for m in completed.new_messages] == ["hi"]
    assert list(saver.list(None)) == []  # the graph ran, and the user's saver never saw it
