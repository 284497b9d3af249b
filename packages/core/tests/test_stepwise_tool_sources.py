"""Tool sources in the Stepwise runner: listing, deferral, routing by stored reference, failures."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Sequence
from datetime import timedelta

import pytest
from dex_agents import (
    AgentEventWriter,
    AgentMessage,
    AgentToolCall,
    AgentToolCallStatus,
    AgentTurnContext,
    ConfigurationError,
    ConfigurationTypeError,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    InteractionMode,
    ResolvedToolPolicy,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionResult,
    ToolTaskCancellation,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)
from dex_agents.stepwise import (
    AgentDefinition,
    ListedTool,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    StepwiseAgentRunner,
    function_tool,
)
from dex_agents.stepwise._input_items import user_text_message


class _FakeSource:
    """A tool source in memory that records what reached it."""

    def __init__(
        self,
        source_name: str,
        tools: Sequence[str],
        *,
        fails: bool = False,
        delay: float = 0.0,
    ) -> None:
        self.source_name = source_name
        self._tools = tools
        self._fails = fails
        self._delay = delay
        self.executed: list[AgentToolCall] = []
        self.polled: list[AgentToolCall] = []
        self.cancelled: list[AgentToolCall] = []

    async def list_tools(self) -> list[ListedTool]:
        if self._delay:
            await asyncio.sleep(self._delay)
        if self._fails:
            raise ConnectionError("server down")
        return [
            ListedTool(name, f"{name} from {self.source_name}", {"type": "object"}, ToolEffect.READ)
            for name in self._tools
        ]

    def deferred_tool_call(
        self, turn: AgentTurnContext, tool_call_id: str, arguments: str, listed_tool: ListedTool
    ) -> DeferredToolCall:
        return DeferredToolCall(
            tool_call_id,
            listed_tool.name,
            arguments,
            turn.resolve_tool_policy(listed_tool.name, listed_tool.framework_effect),
            tool_source_reference=f"{self.source_name}:{listed_tool.name}",
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        self.executed.append(call.tool_call)
        if call.tool_call.tool_name == "start_report":
            return ToolTaskStarted(task_id="job-1", poll_interval_seconds=5)
        return ToolExecutionResult(f"{self.source_name} ran {call.tool_call.tool_source_reference}")

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        self.polled.append(poll.tool_call)
        return ToolTaskPending(poll_interval_seconds=10)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        self.cancelled.append(cancellation.tool_call)


def _calling(*names: str) -> ScriptedModelClient:
    def script(request: ModelRequest) -> ScriptedModelReply:
        return ScriptedModelReply(tool_calls=[ScriptedToolCall(name, {}) for name in names])

    return ScriptedModelClient(script)


def _turn(**values: object) -> AgentTurnContext:
    message = user_text_message("go")
    fields: dict[str, object] = {
        "flow_id": "session-1",
        "turn_id": "turn-1",
        "attempt": 1,
        "messages": (
            AgentMessage(
                sequence=1,
                role=message.role,
                framework_item=message.framework_item,
                text=message.text,
            ),
        ),
        "framework_run_state": None,
        "tool_calls": {},
        "events": AgentEventWriter.discarding(turn_id="turn-1"),
        **values,
    }
    return AgentTurnContext(**fields)  # type: ignore[arg-type]


def _record(call: DeferredToolCall) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        arguments=call.arguments,
        effect=call.policy.effect,
        requires_approval=call.policy.requires_approval,
        status=AgentToolCallStatus.APPROVED,
        turn_id="turn-1",
        deferral_order=0,
        tool_source_reference=call.tool_source_reference,
    )


def _execution(record: AgentToolCall) -> DeferredToolExecution:
    return DeferredToolExecution(
        flow_id="session-1", tool_call=record, attempt=1, events=AgentEventWriter.discarding()
    )


@function_tool(effect=ToolEffect.READ)
def local_tool() -> str:
    return "local"


async def test_source_tools_are_offered_after_function_tools_and_routed_by_reference() -> None:
    files, tickets = _FakeSource("files", ["read_file"]), _FakeSource("tickets", ["open_ticket"])
    model = _calling("read_file", "open_ticket")
    definition = AgentDefinition(
        name="a", instructions="i", model=model, tools=[local_tool], tool_sources=[files, tickets]
    )
    runner = StepwiseAgentRunner(definition)

    outcome = await runner.run_model_step(_turn())

    assert [tool.name for tool in model.requests[0].tools] == [
        "local_tool",
        "read_file",
        "open_ticket",
    ]
    assert isinstance(outcome, ToolCallsRequested)
    read_call = outcome.tool_calls[0]
    assert read_call.policy == ResolvedToolPolicy(ToolEffect.READ, False)
    assert json.loads(read_call.tool_source_reference or "") == {
        "stepwise_tool_source": "files",
        "reference": "files:read_file",
    }
    # A Worker whose sources are listed in another order still reaches the right source.
    other_worker = StepwiseAgentRunner(
        dataclasses.replace(definition, tool_sources=[tickets, files])
    )
    result = await other_worker.execute_deferred_tool_call(_execution(_record(read_call)))
    assert result == ToolExecutionResult("files ran files:read_file")
    assert files.executed[0].tool_source_reference == "files:read_file"
    assert tickets.executed == []


async def test_a_source_whose_listing_fails_or_is_slow_offers_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = _FakeSource("down", ["broken_tool"], fails=True)
    slow = _FakeSource("slow", ["slow_tool"], delay=5)
    up = _FakeSource("up", ["good_tool"])
    model = _calling("good_tool")
    definition = AgentDefinition(
        name="a",
        instructions="i",
        model=model,
        tool_sources=[down, slow, up],
        tool_source_listing_timeout=timedelta(milliseconds=50),
    )
    with caplog.at_level(logging.WARNING):
        await StepwiseAgentRunner(definition).run_model_step(_turn())
    assert [tool.name for tool in model.requests[0].tools] == ["good_tool"]
    assert "tool source down offers no tools" in caplog.text
    assert "tool source slow offers no tools" in caplog.text


@pytest.mark.parametrize(
    ("sources", "built_ins", "message"),
    [
        (
            [_FakeSource("s", ["local_tool"])],
            frozenset(),
            "tool local_tool of a tool source uses the name of a function tool",
        ),
        (
            [_FakeSource("s", ["ask_user"])],
            frozenset({"ask_user"}),
            "tool ask_user uses the name of an enabled built-in tool",
        ),
        (
            [_FakeSource("a", ["x"]), _FakeSource("b", ["x"])],
            frozenset(),
            "two tool sources list a tool named x",
        ),
    ],
)
async def test_a_listed_name_that_repeats_another_tool_fails_before_the_model_request(
    sources: list[_FakeSource], built_ins: frozenset[str], message: str
) -> None:
    model = _calling("x")
    definition = AgentDefinition(
        name="a", instructions="i", model=model, tools=[local_tool], tool_sources=sources
    )
    with pytest.raises(ConfigurationError) as raised:
        await StepwiseAgentRunner(definition).run_model_step(
            _turn(enabled_built_in_tools=built_ins)
        )
    assert str(raised.value) == message
    assert model.requests == ()


async def test_a_name_no_listing_offered_is_an_unknown_tool_without_approval() -> None:
    source = _FakeSource("s", [], fails=True)
    definition = AgentDefinition(
        name="a", instructions="i", model=_calling("gone"), tool_sources=[source]
    )
    outcome = await StepwiseAgentRunner(definition).run_model_step(_turn())
    assert isinstance(outcome, ToolCallsRequested)
    call = outcome.tool_calls[0]
    assert call.policy == ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, False)
    assert call.tool_source_reference is None


async def test_a_stored_call_of_a_source_this_worker_lacks_raises_lookup_error() -> None:
    source = _FakeSource("files", ["read_file"])
    definition = AgentDefinition(
        name="a", instructions="i", model=_calling("read_file"), tool_sources=[source]
    )
    outcome = await StepwiseAgentRunner(definition).run_model_step(_turn())
    assert isinstance(outcome, ToolCallsRequested)
    without_source = StepwiseAgentRunner(dataclasses.replace(definition, tool_sources=[]))
    with pytest.raises(LookupError, match="names tool source files"):
        await without_source.execute_deferred_tool_call(_execution(_record(outcome.tool_calls[0])))


async def test_tasks_are_polled_and_cancelled_through_their_source() -> None:
    source = _FakeSource("reports", ["start_report"])
    definition = AgentDefinition(
        name="a", instructions="i", model=_calling("start_report"), tool_sources=[source]
    )
    runner = StepwiseAgentRunner(definition)
    outcome = await runner.run_model_step(_turn())
    assert isinstance(outcome, ToolCallsRequested)
    record = _record(outcome.tool_calls[0])
    started = await runner.execute_deferred_tool_call(_execution(record))
    assert started == ToolTaskStarted(task_id="job-1", poll_interval_seconds=5)

    waiting = dataclasses.replace(
        record, status=AgentToolCallStatus.WAITING_FOR_TASK, task_id="job-1"
    )
    poll = ToolTaskPoll(
        flow_id="session-1", tool_call=waiting, attempt=1, events=AgentEventWriter.discarding()
    )
    assert await runner.poll_tool_task(poll) == ToolTaskPending(poll_interval_seconds=10)
    assert source.polled[0].tool_source_reference == "reports:start_report"

    await runner.cancel_tool_task(
        ToolTaskCancellation(flow_id="session-1", tool_call=waiting, attempt=1)
    )
    assert [record.task_id for record in source.cancelled] == ["job-1"]


async def test_planning_turns_and_calls_past_the_limit_list_nothing() -> None:
    source = _FakeSource("s", ["listed"])
    model = _calling("listed")
    definition = AgentDefinition(name="a", instructions="i", model=model, tool_sources=[source])
    await StepwiseAgentRunner(definition).run_model_step(
        _turn(interaction_mode=InteractionMode.PLANNING)
    )
    assert model.requests[0].tools == ()


async def test_a_function_tool_cannot_start_a_task() -> None:
    @function_tool(effect=ToolEffect.READ)
    def start() -> ToolTaskStarted:
        return ToolTaskStarted(task_id="t", poll_interval_seconds=1)

    runner = StepwiseAgentRunner(
        AgentDefinition(name="a", instructions="i", model=_calling("start"), tools=[start])
    )
    outcome = await runner.run_model_step(_turn())
    assert isinstance(outcome, ToolCallsRequested)
    with pytest.raises(
        ConfigurationTypeError, match="function tool start returned ToolTaskStarted"
    ):
        await runner.execute_deferred_tool_call(_execution(_record(outcome.tool_calls[0])))


def test_declared_names_are_checked_when_the_definition_is_built() -> None:
    class _Declaring(_FakeSource):
        def declared_tool_names(self) -> list[str]:
            return ["local_tool"]

    with pytest.raises(
        ValueError, match="tool local_tool of a tool source uses the name of a function tool"
    ):
        AgentDefinition(
            name="a",
            instructions="i",
            model=_calling(),
            tools=[local_tool],
            tool_sources=[_Declaring("d", [])],
        )


def test_source_names_must_be_unique() -> None:
    definition = AgentDefinition(
        name="a", instructions="i", model=_calling(), tool_sources=[_FakeSource("mcp", [])]
    )
    assert [source.source_name for source in definition.tool_sources] == ["mcp"]
    with pytest.raises(ConfigurationError, match=r"^two tool sources are named mcp$"):
        AgentDefinition(
            name="a",
            instructions="i",
            model=_calling(),
            tool_sources=[_FakeSource("mcp", []), _FakeSource("mcp", [])],
        )
