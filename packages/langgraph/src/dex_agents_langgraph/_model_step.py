"""One ``RunModel``: the user's graph runs until its model node answered, and stops.

The graph runs with ``interrupt_before`` every tool node, which is LangGraph's own breakpoint
mechanism, and a private ``InMemorySaver`` that lives for this one call (``step_checkpointer``,
which keeps values as objects): LangGraph needs a checkpointer to report where a run stopped
(``get_state().next``) and to start a run at a given node (``update_state(as_node=...)``), and
Dex, not the saver, makes the session durable.

- A turn's first model call starts the graph at ``START`` with the stored messages as input.
- A later call writes the recorded tool results (and the other state channels kept in the run
  state) as the update of the tool node the graph stopped before, so the graph goes on along that
  node's edges, exactly as if the tool node had run.

The graph then runs one model call. When it stops before a tool node, the tool calls of the new
AI message are the deferred calls; when it ends, the turn is complete.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dex_agents import (
    CONTEXT_SUMMARY_NOTE_HEADER,
    AgentEventWriter,
    AgentTurnContext,
    AgentTurnOutcome,
    InteractionMode,
    RunnerContractError,
    ToolCallsRequested,
    TurnCompleted,
    build_plan_note,
)
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel

from dex_agents_langgraph._graph_tools import GraphTools
from dex_agents_langgraph._model_call_observer import ModelCallObserver
from dex_agents_langgraph._run_state import GraphRunState
from dex_agents_langgraph._step_checkpointer import step_checkpointer
from dex_agents_langgraph._tool_context import OFFER_CONFIG_KEY, model_offer
from dex_agents_langgraph._transcript import (
    PendingToolCall,
    framework_message,
    langchain_message,
    note_message,
    pending_tool_calls,
    recorded_tool_message,
    unanswered_tool_calls,
)

__all__ = ["GraphModelStep", "ModelInput", "build_model_input", "recorded_results"]

_SUMMARY_NOTE_ID = "dex-context-summary"
_PLAN_NOTE_ID = "dex-plan-note"


@dataclass(frozen=True)
class ModelInput:
    """The messages of one model call, and which of them the session has not stored yet.

    Attributes:
        messages: The graph's messages channel for this call: the summary note, the stored
            messages (plan note before the turn's own), and the pending tool results.
        results: The results of the previous model response's calls, from their final records;
            stored by this call.
    """

    messages: tuple[BaseMessage, ...]
    results: tuple[BaseMessage, ...]


def _turn_history(turn: AgentTurnContext) -> tuple[list[BaseMessage], int, tuple[BaseMessage, ...]]:
    """The stored messages (earlier orphans paired), where the turn's own start, and the results
    of the turn's unanswered calls from their final records."""
    stored = [langchain_message(message) for message in turn.messages]
    start = next(
        (i for i, message in enumerate(turn.messages) if message.turn_id == turn.turn_id),
        len(stored),
    )
    history, pending = pending_tool_calls(stored, start)
    results = tuple(
        recorded_tool_message(call, turn.recorded_tool_call(call.tool_call_id), turn.turn_id)
        for call in pending
    )
    # Orphans are paired only before the turn, so the turn's messages end the history.
    return history, len(history) - (len(stored) - start), results


def recorded_results(turn: AgentTurnContext) -> tuple[BaseMessage, ...]:
    """The ``ToolMessage`` results of the turn's stored calls that have none yet.

    Raises:
        ValueError: When a stored message is not a LangChain message.
    """
    return _turn_history(turn)[2]


def build_model_input(turn: AgentTurnContext) -> ModelInput:
    """Rebuild the graph's messages from committed state only.

    Raises:
        ValueError: When a stored message is not a LangChain message.
    """
    history, turn_start, results = _turn_history(turn)
    notes: list[BaseMessage] = []
    if turn.context_summary is not None:
        summary = f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{turn.context_summary.text}"
        notes.append(note_message(summary, _SUMMARY_NOTE_ID))
    plan_note = build_plan_note(turn.plan, turn.interaction_mode)
    if plan_note is not None:
        history.insert(turn_start, note_message(plan_note, _PLAN_NOTE_ID))
    return ModelInput(messages=(*notes, *history, *results), results=results)


@dataclass(frozen=True)
class GraphModelStep:
    """Runs the graph for one model call of a turn.

    Attributes:
        tools: The user's compiled graph, its tool nodes and tools.
        messages_key: The state channel of the conversation.
        defer: Turns the tool calls of the model's response into deferred calls.
        context: Builds the run's LangGraph context from the turn's session settings, or ``None``.
        recursion_limit: LangGraph's step limit for this one run.
    """

    tools: GraphTools
    messages_key: str
    defer: Callable[[AgentTurnContext, Sequence[PendingToolCall]], Sequence[Any]]
    context: Callable[[Mapping[str, object]], object] | None
    recursion_limit: int

    async def run(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Make the turn's next model call and say what the graph asks for next.

        Raises:
            SecondModelCallError: When the graph starts a second model call before a tool node.
            RunnerContractError: When the graph stops elsewhere than before a tool node, or
                before one with no tool call to run.
            ValueError: When the run state or a stored message is not this runner's.
        """
        model_input = build_model_input(turn)
        observer = ModelCallObserver()
        graph = self.tools.graph.copy(update={"checkpointer": step_checkpointer()})
        config = self._config(turn, observer)
        if turn.framework_run_state is None:
            start: dict[str, Any] | None = {self.messages_key: list(model_input.messages)}
        else:
            state = GraphRunState.decode(turn.framework_run_state)
            values = {**state.channels, self.messages_key: list(model_input.messages)}
            await graph.aupdate_state(config, values, as_node=state.resume_node)
            start = None
        await self._stream(graph, start, config, turn, model_input)
        snapshot = await graph.aget_state(config)
        input_ids = {message.id for message in model_input.messages}
        produced = [m for m in snapshot.values.get(self.messages_key, ()) if m.id not in input_ids]
        new_messages = tuple(
            framework_message(message) for message in (*model_input.results, *produced)
        )
        usage, metadata = observer.usage(), observer.metadata()
        stopped_before = [node for node in snapshot.next if node in self.tools.tool_nodes]
        if not snapshot.next:
            return TurnCompleted(new_messages, usage, model_call_metadata=metadata)
        if len(stopped_before) != len(snapshot.next) or len(set(stopped_before)) != 1:
            raise RunnerContractError(_stop_error(snapshot.next, snapshot.tasks))
        calls = unanswered_tool_calls(produced)
        if not calls:
            raise RunnerContractError(
                f"the graph went to tool node {stopped_before[0]!r}, but the model's response has "
                "no tool call to run; route to a tool node only when the last AI message has "
                "tool calls (langgraph.prebuilt.tools_condition)"
            )
        run_state = GraphRunState(
            resume_node=stopped_before[0],
            channels={
                key: value for key, value in snapshot.values.items() if key != self.messages_key
            },
        )
        return ToolCallsRequested(
            framework_run_state=run_state.encode(),
            tool_calls=tuple(self.defer(turn, calls)),
            usage=usage,
            new_messages=new_messages,
            model_call_metadata=metadata,
        )

    def _config(self, turn: AgentTurnContext, observer: ModelCallObserver) -> RunnableConfig:
        offer = model_offer(
            sorted(turn.enabled_built_in_tools),
            planning=turn.interaction_mode is InteractionMode.PLANNING,
        )
        return {
            "configurable": {
                "thread_id": f"{turn.flow_id}/{turn.turn_id}",
                OFFER_CONFIG_KEY: offer,
            },
            "callbacks": [observer],
            "recursion_limit": self.recursion_limit,
            "run_name": f"dex-agents {turn.turn_id}",
        }

    async def _stream(
        self,
        graph: Pregel[Any, Any, Any, Any],
        start: dict[str, Any] | None,
        config: RunnableConfig,
        turn: AgentTurnContext,
        model_input: ModelInput,
    ) -> None:
        context = self.context(turn.session_settings) if self.context is not None else None
        deltas = _DeltaWriter(turn.events, {message.id for message in model_input.messages})
        async for chunk, _metadata in graph.astream(
            start,
            config,
            context=context,
            stream_mode="messages",
            interrupt_before=list(self.tools.tool_nodes),
        ):
            deltas.write(chunk)


class _DeltaWriter:
    """Forwards the model's streamed text and reasoning to the turn's events."""

    def __init__(self, events: AgentEventWriter, known_ids: set[str | None]) -> None:
        self._events = events
        self._known_ids = known_ids
        self._streamed_ids: set[str | None] = set()

    def write(self, message: object) -> None:
        if isinstance(message, AIMessageChunk):
            self._streamed_ids.add(message.id)
            self._write_blocks(message)
        elif (
            isinstance(message, AIMessage)
            and message.id not in self._known_ids
            and message.id not in self._streamed_ids
        ):
            # A model that does not stream: its whole answer arrives once.
            self._streamed_ids.add(message.id)
            self._write_blocks(message)

    def _write_blocks(self, message: AIMessage) -> None:
        text = message.text
        if text:
            self._events.write_text_delta(text)
        if isinstance(message.content, list):
            for block in message.content:
                if isinstance(block, dict) and block.get("type") == "reasoning":
                    reasoning = block.get("reasoning")
                    if isinstance(reasoning, str) and reasoning:
                        self._events.write_reasoning_delta(reasoning)


def _stop_error(next_nodes: Sequence[str], tasks: Sequence[Any]) -> str:
    interrupted = [task.name for task in tasks if getattr(task, "interrupts", ())]
    if interrupted:
        return (
            f"node {interrupted[0]!r} called interrupt() during RunModel; in a Dex session a "
            "person answers through the ask_user built-in tool, or through interrupt() inside a "
            "tool, which runs in its own tool Step"
        )
    return (
        f"the graph stopped before nodes {list(next_nodes)!r}; RunModel stops only before a "
        "single tool node (a ToolNode) after a model call"
    )
