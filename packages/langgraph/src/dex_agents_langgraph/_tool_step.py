"""One tool call in its own tool Step: the call's own ``ToolNode`` runs it, in a one-node graph.

The graph's tool node never runs in ``RunModel``; in the tool Step, the ``ToolNode`` that holds the
tool runs just this one call, as the only node of a small graph, so everything LangGraph does
around a tool still happens: argument validation, ``InjectedToolCallId``, ``ToolRuntime`` (with a
state of the calling AI message only), the node's ``wrap_tool_call`` and ``handle_tool_errors``,
and ``interrupt()``:

- ``interrupt("question")`` or ``interrupt({"question": ..., "choices": [...],
  "allows_free_text": ...})`` in a tool becomes the session's question (``ToolInputRequested``).
  After the answer the tool Step runs the tool again and resumes each ``interrupt()`` with the
  answers in order, the way LangGraph resumes a node: the code before ``interrupt()`` runs again,
  so it must take no effect.
- A tool whose ``ToolMessage.artifact`` is a ``ToolTaskStarted`` (``response_format=
  "content_and_artifact"``) started remote work that the session polls.

A ``ToolMessage`` with ``status="error"``, a ``ToolException`` and a ``ToolExecutionError`` are
failures the model sees; any other exception is a Step failure, which the call's effect handles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final

from dex_agents import (
    DeferredToolExecution,
    DeferredToolOutcome,
    RunnerContractError,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskStarted,
    dump_json_text,
)
from dex_agents.adapters import checked_tool_call, tool_question_answers
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel
from langgraph.types import Command, Interrupt
from typing_extensions import TypedDict

from dex_agents_langgraph._graph_tools import GraphTools
from dex_agents_langgraph._step_checkpointer import step_checkpointer
from dex_agents_langgraph._tool_context import IDEMPOTENCY_KEY_CONFIG_KEY

__all__ = ["ToolStepRunner"]

_INTERRUPT_KEY: Final = "__interrupt__"
_RECURSION_LIMIT: Final = 10


class ToolStepRunner:
    """Runs deferred tool calls through the graph's own tool nodes.

    Example:
        >>> outcome = await ToolStepRunner(graph_tools, "messages").execute(call)
    """

    def __init__(self, tools: GraphTools, messages_key: str) -> None:
        self._tools = tools
        self._messages_key = messages_key
        # The tool node reads the calling AI message from the graph's own messages key.
        fields = {messages_key: Annotated[list[AnyMessage], add_messages]}
        state = TypedDict("DexToolStepState", fields)  # type: ignore[misc]
        self._graphs: dict[str, Pregel[Any, Any, Any, Any]] = {
            name: _one_node_graph(state, name, node) for name, node in tools.tool_nodes.items()
        }

    async def execute(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run one call and map what its tool node did to the tool Step's outcome.

        Raises:
            ToolExecutionError: For an unknown tool, arguments that are not a JSON object, a
                ``ToolMessage`` with ``status="error"``, or a ``ToolException``.
            RunnerContractError: When an ``interrupt()`` value is not a question.
            Exception: Whatever else the tool raises.
        """
        record = call.tool_call
        # The kit's words for arguments that break the schema, not ToolNode's own error text.
        _, arguments = checked_tool_call(
            self._tools.tools, record.tool_name, record.arguments, _parameters_schema
        )
        node = self._tools.node_of_tool[record.tool_name]
        request = AIMessage(
            content="",
            tool_calls=[
                {
                    "name": record.tool_name,
                    "args": arguments,
                    "id": record.tool_call_id,
                    "type": "tool_call",
                }
            ],
            id=f"dex-call-{record.tool_call_id}",
        )
        graph = self._graphs[node].copy(update={"checkpointer": step_checkpointer()})
        config: RunnableConfig = {
            "configurable": {
                "thread_id": call.idempotency_key,
                IDEMPOTENCY_KEY_CONFIG_KEY: call.idempotency_key,
            },
            "recursion_limit": _RECURSION_LIMIT,
        }
        answers = tool_question_answers(call)
        try:
            output = await graph.ainvoke({self._messages_key: [request]}, config)
            for answer in answers:
                if not output.get(_INTERRUPT_KEY):
                    break
                output = await graph.ainvoke(Command(resume=answer), config)
        except ToolException as failure:
            raise ToolExecutionError(str(failure) or type(failure).__name__) from failure
        interrupts: Sequence[Interrupt] = output.get(_INTERRUPT_KEY) or ()
        if interrupts:
            return _question(record.tool_name, interrupts[0].value)
        return self._result(record.tool_name, record.tool_call_id, output)

    def _result(
        self, tool_name: str, tool_call_id: str, output: Mapping[str, Any]
    ) -> DeferredToolOutcome:
        message = next(
            (
                m
                for m in reversed(output.get(self._messages_key, ()))
                if isinstance(m, ToolMessage) and m.tool_call_id == tool_call_id
            ),
            None,
        )
        if message is None:
            raise RunnerContractError(
                f"tool {tool_name} returned no ToolMessage for call {tool_call_id}; a tool that "
                "returns a Command must put the call's ToolMessage into its messages update"
            )
        if message.status == "error":
            raise ToolExecutionError(_content_text(message))
        if isinstance(message.artifact, ToolTaskStarted):
            # A task without a poller is recorded by the session's poll (AdapterRunner).
            return message.artifact
        return ToolExecutionResult(_content_text(message))


def _parameters_schema(tool: BaseTool) -> dict[str, Any] | None:
    parameters: dict[str, Any] | None = convert_to_openai_tool(tool)["function"].get("parameters")
    return parameters


def _one_node_graph(state: type, name: str, node: ToolNode) -> Pregel[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(state)
    builder.add_node(name, node)
    builder.add_edge(START, name)
    builder.add_edge(name, END)
    return builder.compile(name=f"dex-tool-step-{name}")


def _question(tool_name: str, value: object) -> ToolInputRequested:
    if isinstance(value, str) and value.strip():
        return ToolInputRequested(value)
    if isinstance(value, Mapping) and isinstance(value.get("question"), str):
        choices = value.get("choices") or ()
        if not isinstance(choices, Sequence) or not all(isinstance(c, str) for c in choices):
            raise RunnerContractError(
                f"tool {tool_name} called interrupt() with choices {choices!r}; choices must be "
                "a list of strings"
            )
        return ToolInputRequested(
            value["question"],
            choices=tuple(choices),
            allows_free_text=bool(value.get("allows_free_text", True)),
        )
    raise RunnerContractError(
        f"tool {tool_name} called interrupt({value!r}); in a Dex session a tool's interrupt() "
        'asks the user: pass the question text, or {"question": ..., "choices": [...], '
        '"allows_free_text": ...}'
    )


def _content_text(message: ToolMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    text = message.text
    return text if text else dump_json_text(message.content)
