"""StepwiseAgentRunner driven directly with hand-built turn contexts, as the session would."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentEventWriter,
    AgentFrameworkRunner,
    AgentMessage,
    AgentPlan,
    AgentTodo,
    AgentToolCall,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    BuiltInTool,
    DeferredToolExecution,
    FrameworkMessage,
    InteractionMode,
    MessageRole,
    PlanStatus,
    ResolvedToolPolicy,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
    UnfinishedTurnMessageBuilder,
    build_plan_note,
)
from dex_agents._runner_contract import (
    runner_supports_plan_mode,
    validate_tool_calls_requested,
)
from dex_agents.stepwise import (
    AgentDefinition,
    InstructionContext,
    ModelOutputItem,
    ModelRequest,
    ModelToolChoice,
    ModelToolResult,
    ModelUserText,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    StepwiseAgentRunner,
    ToolCallContext,
    function_tool,
    model_call_limit_tool_result,
    stepwise_agent_session_options,
)
from dex_agents.testing import TurnContextBuilder

_ORDERS = {"7": {"order_id": "7", "total_cents": "1200"}}
_REFUND_KEYS: list[str] = []


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    if order_id not in _ORDERS:
        raise ToolExecutionError(f"order {order_id} does not exist")
    return _ORDERS[order_id]


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
def refund_order(order_id: str, amount_cents: int, context: ToolCallContext) -> str:
    """Refund part of an order."""
    _REFUND_KEYS.append(context.idempotency_key)
    return f"refunded {amount_cents} on order {order_id}"


@function_tool(effect=ToolEffect.READ)
def ask_user(question: str) -> str:
    """A function tool that collides with the ask_user built-in when that is enabled."""
    return question


def _support_script(request: ModelRequest) -> ScriptedModelReply:
    """Looks the order up, refunds it, then summarizes every result of the turn."""
    results = ScriptedModelClient.tool_results(request)
    if not results:
        return ScriptedModelReply(
            text="Let me look.",
            tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"})],
        )
    if len(results) == 1:
        return ScriptedModelReply(
            reasoning="The order exists; refund it.",
            tool_calls=[ScriptedToolCall("refund_order", {"order_id": "7", "amount_cents": 500})],
        )
    return ScriptedModelReply(text=" | ".join(result.output for result in results))


@dataclass
class _Session:
    """The session's side of the contract, in memory: stored messages and final tool records."""

    runner: StepwiseAgentRunner
    enabled_built_in_tools: frozenset[str] = frozenset()
    turns: TurnContextBuilder = field(default_factory=TurnContextBuilder)
    records: dict[str, AgentToolCall] = field(default_factory=dict)
    run_state: str | None = None

    @property
    def flow_id(self) -> str:
        return self.turns.flow_id

    @property
    def turn_id(self) -> str:
        return self.turns.turn_id

    @property
    def messages(self) -> list[AgentMessage]:
        return self.turns.messages

    def store(self, messages: Sequence[FrameworkMessage]) -> None:
        self.turns.store(messages)

    def start_turn(self, text: str) -> None:
        self.records = {}
        self.run_state = None
        self.turns.start_turn(self.runner.build_user_message(text))

    def context(self) -> AgentTurnContext:
        definition = self.runner.definition
        # What stepwise_agent_session_options derives, built here so that definitions with
        # options this build's AgentSessionOptions lacks (built-in tools) still run.
        policies = {tool.name: tool.policy for tool in definition.tools}
        policies.update(definition.tool_policies)
        return self.turns.context(
            run_state=self.run_state,
            records=self.records.values(),
            enabled_built_in_tools=self.enabled_built_in_tools,
            tool_policies=policies,
            default_tool_effect=definition.default_tool_effect,
        )

    async def run_model(self) -> AgentTurnOutcome:
        turn = self.context()
        outcome = await self.runner.run_model_step(turn)
        if isinstance(outcome, ToolCallsRequested):
            validate_tool_calls_requested(outcome, turn)
            self.store(outcome.new_messages)
            self.run_state = outcome.framework_run_state
        else:
            self.store(outcome.new_messages)
            self.run_state = None
        return outcome

    async def run_tools(self, outcome: ToolCallsRequested) -> None:
        for order, call in enumerate(outcome.tool_calls, start=len(self.records)):
            record = AgentToolCall(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                arguments=call.arguments,
                effect=call.policy.effect,
                requires_approval=call.policy.requires_approval,
                status=AgentToolCallStatus.APPROVED,
                turn_id=self.turn_id,
                deferral_order=order,
            )
            execution = DeferredToolExecution(
                flow_id=self.flow_id,
                tool_call=record,
                attempt=1,
                events=AgentEventWriter.discarding(turn_id=self.turn_id),
            )
            try:
                result = await self.runner.execute_deferred_tool_call(execution)
                assert isinstance(result, ToolExecutionResult)
                final = _final(record, AgentToolCallStatus.SUCCEEDED, output=result.output)
            except ToolExecutionError as error:
                final = _final(record, AgentToolCallStatus.FAILED, error=str(error))
            self.records[call.tool_call_id] = final

    async def run_turn(self, text: str) -> list[AgentTurnOutcome]:
        self.start_turn(text)
        outcomes = [await self.run_model()]
        while isinstance(outcomes[-1], ToolCallsRequested):
            await self.run_tools(outcomes[-1])
            outcomes.append(await self.run_model())
        return outcomes


def _final(record: AgentToolCall, status: AgentToolCallStatus, **values: str) -> AgentToolCall:
    data = record.to_json()
    data.update(status=status.value, **values)
    return AgentToolCall.from_json(data)


def _definition(model: ScriptedModelClient, **values: object) -> AgentDefinition:
    fields: dict[str, object] = {
        "name": "support",
        "instructions": "You help customers with their orders.",
        "model": model,
        "tools": [lookup_order, refund_order],
        **values,
    }
    return AgentDefinition(**fields)  # type: ignore[arg-type]


def test_the_runner_implements_the_contract() -> None:
    runner = StepwiseAgentRunner(_definition(ScriptedModelClient(_support_script)))
    assert isinstance(runner, AgentFrameworkRunner)
    assert isinstance(runner, UnfinishedTurnMessageBuilder)
    message = runner.build_user_message("hello")
    assert (message.role, message.text) == (MessageRole.USER, "hello")


async def test_a_full_turn_runs_tools_from_final_records_to_the_final_answer() -> None:
    model = ScriptedModelClient(_support_script)
    session = _Session(StepwiseAgentRunner(_definition(model)))
    _REFUND_KEYS.clear()

    outcomes = await session.run_turn("Refund order 7")

    assert [type(outcome) for outcome in outcomes] == [
        ToolCallsRequested,
        ToolCallsRequested,
        TurnCompleted,
    ]
    first, second, final = outcomes
    assert isinstance(first, ToolCallsRequested) and isinstance(second, ToolCallsRequested)
    assert [call.tool_name for call in first.tool_calls] == ["lookup_order"]
    assert first.tool_calls[0].policy == ResolvedToolPolicy(ToolEffect.READ, False)
    assert second.tool_calls[0].policy == ResolvedToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, True)
    # The run state holds only the model call count; the transcript is in the stored messages.
    assert len(first.framework_run_state) < 40
    assert first.usage.model_calls == 1

    refund_id = second.tool_calls[0].tool_call_id
    assert [f"session-1/turn-1/{refund_id}"] == _REFUND_KEYS
    assert isinstance(final, TurnCompleted)
    lookup_output = json.dumps(_ORDERS["7"])
    assert final.new_messages[-1].text == f"{lookup_output} | refunded 500 on order 7"

    # Exactly one request per model call, each with the whole input built from committed state.
    assert len(model.requests) == 3
    last_input = model.requests[-1].input
    assert last_input[0] == ModelUserText("Refund order 7")
    results = [item for item in last_input if isinstance(item, ModelToolResult)]
    assert [result.output for result in results] == [lookup_output, "refunded 500 on order 7"]
    assert all(request.instructions.startswith("You help") for request in model.requests)
    assert {tool.name for tool in model.requests[0].tools} == {"lookup_order", "refund_order"}

    # The stored transcript: user, text, call, result, reasoning, call, result, answer.
    assert [message.role for message in session.messages] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.ASSISTANT,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.ASSISTANT,
    ]
    stored_results = [message for message in session.messages if message.role is MessageRole.TOOL]
    assert [message.tool_call_id for message in stored_results] == [
        first.tool_calls[0].tool_call_id,
        refund_id,
    ]


async def test_provider_items_replay_unchanged() -> None:
    model = ScriptedModelClient(_support_script)
    session = _Session(StepwiseAgentRunner(_definition(model)))
    await session.run_turn("Refund order 7")
    second_input = model.requests[1].input
    outputs = [item for item in second_input if isinstance(item, ModelOutputItem)]
    first_response_items = [
        item for item in model.requests[2].input if isinstance(item, ModelOutputItem)
    ]
    assert outputs == first_response_items[: len(outputs)]
    assert json.loads(outputs[1].item)["type"] == "function_call"


async def test_a_rerun_model_call_gives_the_same_tool_call_ids() -> None:
    model = ScriptedModelClient(_support_script)
    session = _Session(StepwiseAgentRunner(_definition(model)))
    session.start_turn("Refund order 7")
    turn = session.context()
    first = await session.runner.run_model_step(turn)
    rerun = await session.runner.run_model_step(turn)
    assert isinstance(first, ToolCallsRequested) and isinstance(rerun, ToolCallsRequested)
    assert first.tool_calls == rerun.tool_calls
    assert first.new_messages == rerun.new_messages


async def test_failed_calls_reach_the_model_as_their_error() -> None:
    def script(request: ModelRequest) -> ScriptedModelReply:
        results = ScriptedModelClient.tool_results(request)
        if results:
            return ScriptedModelReply(text=results[0].output)
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "99"})])

    session = _Session(StepwiseAgentRunner(_definition(ScriptedModelClient(script))))
    outcomes = await session.run_turn("Where is order 99?")
    final = outcomes[-1]
    assert isinstance(final, TurnCompleted)
    assert final.new_messages[-1].text == "Error: order 99 does not exist"


async def test_the_model_call_limit_offers_no_tools_and_ends_the_turn() -> None:
    def always_call(request: ModelRequest) -> ScriptedModelReply:
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"})])

    model = ScriptedModelClient(always_call)
    session = _Session(StepwiseAgentRunner(_definition(model, max_model_calls_per_turn=2)))

    outcomes = await session.run_turn("Loop forever")

    assert [type(outcome) for outcome in outcomes] == [
        ToolCallsRequested,
        ToolCallsRequested,
        TurnCompleted,
    ]
    assert [len(request.tools) for request in model.requests] == [2, 2, 0]
    final = outcomes[-1]
    assert isinstance(final, TurnCompleted)
    limit_result = final.new_messages[-1]
    assert limit_result.role is MessageRole.TOOL
    assert limit_result.tool_output == (
        "The tool call was not run: this turn reached its limit of 2 model calls."
    )
    assert limit_result.tool_output == model_call_limit_tool_result(2)
    # Every stored call has a result: the limit result pairs with the last call.
    calls = [
        m.tool_call_id
        for m in session.messages
        if m.role is MessageRole.ASSISTANT and m.tool_call_id
    ]
    results = [m.tool_call_id for m in session.messages if m.role is MessageRole.TOOL]
    assert calls == results


async def test_an_orphaned_call_gets_the_outcome_unknown_text() -> None:
    model = ScriptedModelClient(_support_script)
    session = _Session(StepwiseAgentRunner(_definition(model)))
    session.start_turn("Refund order 7")
    requested = await session.run_model()
    assert isinstance(requested, ToolCallsRequested)
    # The turn ends without results (as if build_unfinished_turn_messages failed); a new turn starts.
    session.start_turn("Never mind, what is 2 + 2?")
    await session.run_model()

    request = model.requests[-1]
    call_id = requested.tool_calls[0].tool_call_id
    position = next(
        index
        for index, item in enumerate(request.input)
        if isinstance(item, ModelOutputItem)
        and item.tool_call is not None
        and item.tool_call.tool_call_id == call_id
    )
    assert request.input[position + 1] == ModelToolResult(
        call_id, "lookup_order", OUTCOME_UNKNOWN_TOOL_RESULT
    )
    assert request.input[position + 2] == ModelUserText("Never mind, what is 2 + 2?")


async def test_unfinished_turn_messages_are_the_results_from_final_records() -> None:
    model = ScriptedModelClient(_support_script)
    session = _Session(StepwiseAgentRunner(_definition(model)))
    session.start_turn("Refund order 7")
    requested = await session.run_model()
    assert isinstance(requested, ToolCallsRequested)

    without_records = session.runner.build_unfinished_turn_messages(session.context())
    assert [message.tool_output for message in without_records] == [OUTCOME_UNKNOWN_TOOL_RESULT]

    await session.run_tools(requested)
    messages = session.runner.build_unfinished_turn_messages(session.context())
    assert [(m.role, m.tool_call_id, m.tool_output) for m in messages] == [
        (MessageRole.TOOL, requested.tool_calls[0].tool_call_id, json.dumps(_ORDERS["7"]))
    ]


async def test_an_unknown_tool_is_deferred_without_approval_and_fails() -> None:
    def script(request: ModelRequest) -> ScriptedModelReply:
        if ScriptedModelClient.tool_results(request):
            return ScriptedModelReply(text=ScriptedModelClient.tool_results(request)[0].output)
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("delete_everything")])

    session = _Session(StepwiseAgentRunner(_definition(ScriptedModelClient(script))))
    outcomes = await session.run_turn("Go")
    first = outcomes[0]
    assert isinstance(first, ToolCallsRequested)
    assert first.tool_calls[0].policy == ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, False)
    final = outcomes[-1]
    assert isinstance(final, TurnCompleted)
    assert final.new_messages[-1].text == "Error: unknown tool delete_everything"


async def test_invalid_arguments_reach_the_model() -> None:
    def script(request: ModelRequest) -> ScriptedModelReply:
        if ScriptedModelClient.tool_results(request):
            return ScriptedModelReply(text=ScriptedModelClient.tool_results(request)[0].output)
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("lookup_order", "{oops")])

    session = _Session(StepwiseAgentRunner(_definition(ScriptedModelClient(script))))
    final = (await session.run_turn("Go"))[-1]
    assert isinstance(final, TurnCompleted)
    assert final.new_messages[-1].text == (
        "Error: invalid arguments for lookup_order: arguments are not valid JSON"
    )


async def test_policies_of_the_definition_win_over_the_tool_effect() -> None:
    definition = _definition(
        ScriptedModelClient(_support_script),
        tool_policies={"refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)},
    )
    options = stepwise_agent_session_options(definition)
    assert options.tool_policies == {
        "lookup_order": ToolPolicy(ToolEffect.READ),
        "refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
    }
    session = _Session(StepwiseAgentRunner(definition))
    outcomes = await session.run_turn("Refund order 7")
    second = outcomes[1]
    assert isinstance(second, ToolCallsRequested)
    assert second.tool_calls[0].policy == ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, False)


async def test_a_tool_requires_approval_applies_without_an_explicit_policy() -> None:
    @function_tool(effect=ToolEffect.READ, requires_approval=True)
    def peek(order_id: str) -> str:
        return order_id

    def script(request: ModelRequest) -> ScriptedModelReply:
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("peek", {"order_id": "1"})])

    definition = AgentDefinition(
        name="peeker", instructions="Peek.", model=ScriptedModelClient(script), tools=[peek]
    )
    runner = StepwiseAgentRunner(definition)
    session = _Session(runner)
    session.start_turn("Peek")
    # Without the derived options, the tool's own requires_approval still applies.
    outcome = await runner.run_model_step(session.turns.context())
    assert isinstance(outcome, ToolCallsRequested)
    assert outcome.tool_calls[0].policy == ResolvedToolPolicy(ToolEffect.READ, True)


async def test_instructions_function_is_evaluated_in_every_model_call() -> None:
    seen: list[InstructionContext] = []

    async def instructions(context: InstructionContext) -> str:
        seen.append(context)
        return f"Serve {context.turn_id}."

    model = ScriptedModelClient(_support_script)
    session = _Session(StepwiseAgentRunner(_definition(model, instructions=instructions)))
    await session.run_turn("Refund order 7")
    assert [context.turn_id for context in seen] == ["turn-1"] * 3
    assert [request.instructions for request in model.requests] == ["Serve turn-1."] * 3


async def test_a_tool_named_like_a_session_enabled_built_in_fails_before_any_model_request() -> (
    None
):
    model = ScriptedModelClient(_support_script)
    definition = AgentDefinition(name="a", instructions="i", model=model, tools=[ask_user])
    session = _Session(
        StepwiseAgentRunner(definition), enabled_built_in_tools=frozenset({"ask_user"})
    )
    session.start_turn("hi")
    with pytest.raises(
        ValueError, match=r"^tool ask_user uses the name of an enabled built-in tool$"
    ):
        await session.run_model()
    assert model.requests == ()


@pytest.mark.parametrize(
    ("values", "error", "message"),
    [
        ({"tools": [lookup_order, lookup_order]}, ValueError, "^two tools are named lookup_order$"),
        (
            {"tools": [ask_user], "built_in_tools": frozenset({BuiltInTool.ASK_USER})},
            ValueError,
            "^tool ask_user uses the name of an enabled built-in tool$",
        ),
        (
            {"built_in_tools": frozenset({"teleport"})},
            ValueError,
            "unknown built-in tool 'teleport'",
        ),
        (
            {"plan_mode_enabled": True},
            ValueError,
            "plan_mode_enabled needs BuiltInTool.WRITE_TODOS",
        ),
        (
            {"max_model_calls_per_turn": 0},
            ValueError,
            "max_model_calls_per_turn must be at least 1",
        ),
        ({"name": " "}, ValueError, "AgentDefinition.name must be non-blank"),
        ({"tools": [len]}, TypeError, r"tools\[0\] must be a FunctionTool"),
        ({"interrupt_deadline": timedelta(0)}, ValueError, "interrupt_deadline must be positive"),
        ({"planning_tool_choice": "always"}, ValueError, "planning_tool_choice must be"),
        ({"tool_sources": [object()]}, TypeError, r"tool_sources\[0\] is not a ToolSource"),
        ({"tool_policies": {"x": "read"}}, TypeError, r"tool_policies\['x'\] must be a ToolPolicy"),
    ],
)
def test_agent_definition_refuses_bad_values(
    values: Mapping[str, object], error: type[Exception], message: str
) -> None:
    fields: dict[str, object] = {
        "name": "support",
        "instructions": "i",
        "model": ScriptedModelClient(_support_script),
        **values,
    }
    with pytest.raises(error, match=message):
        AgentDefinition(**fields)  # type: ignore[arg-type]


async def test_resolve_model_picks_the_client_from_the_turn_session_settings() -> None:
    small = ScriptedModelClient(lambda request: ScriptedModelReply(text="small"))
    large = ScriptedModelClient(lambda request: ScriptedModelReply(text="large"))
    models = {"small": small, "large": large}
    definition = _definition(
        small, resolve_model=lambda settings: models.get(str(settings.get("model")), small)
    )
    runner = StepwiseAgentRunner(definition)
    session = _Session(runner)
    session.start_turn("hi")
    turn = dataclasses.replace(session.context(), session_settings={"model": "large"})
    outcome = await runner.run_model_step(turn)
    assert isinstance(outcome, TurnCompleted)
    assert outcome.new_messages[-1].text == "large"
    assert (len(small.requests), len(large.requests)) == (0, 1)


def _planning_definition(model: ScriptedModelClient, **values: object) -> AgentDefinition:
    return _definition(
        model,
        built_in_tools=frozenset({BuiltInTool.WRITE_TODOS, BuiltInTool.ASK_USER}),
        plan_mode_enabled=True,
        **values,
    )


async def test_a_planning_turn_offers_only_write_todos_and_sees_the_plan_note() -> None:
    model = ScriptedModelClient(lambda request: ScriptedModelReply(text="Which database?"))
    runner = StepwiseAgentRunner(_planning_definition(model, planning_tool_choice="required"))
    assert runner_supports_plan_mode(runner)
    session = _Session(runner, enabled_built_in_tools=frozenset({"write_todos", "ask_user"}))
    await session.run_turn("Say hi")  # turn-1, chat
    session.start_turn("Plan the migration")  # turn-2, planning
    turn = dataclasses.replace(session.context(), interaction_mode=InteractionMode.PLANNING)

    await runner.run_model_step(turn)

    request = model.requests[-1]
    assert [tool.name for tool in request.tools] == ["write_todos"]
    assert request.tool_choice is ModelToolChoice.REQUIRED
    note = build_plan_note(None, InteractionMode.PLANNING)
    assert note is not None
    # The note comes right before the turn's items, after the earlier turns.
    assert request.input[-2:] == (ModelUserText(note), ModelUserText("Plan the migration"))
    assert ModelUserText("Say hi") in request.input[:-2]
    assert ScriptedModelClient.user_texts(request)[-1] == "Plan the migration"


async def test_a_draft_plan_is_not_forced_again_and_an_executing_turn_has_every_tool() -> None:
    model = ScriptedModelClient(lambda request: ScriptedModelReply(text="ok"))
    runner = StepwiseAgentRunner(_planning_definition(model, planning_tool_choice="required"))
    session = _Session(runner, enabled_built_in_tools=frozenset({"write_todos", "ask_user"}))
    session.start_turn("Revise it")
    draft = AgentPlan(2, PlanStatus.DRAFT, (AgentTodo("Back up"), AgentTodo("Migrate")))
    planning = dataclasses.replace(
        session.context(), interaction_mode=InteractionMode.PLANNING, plan=draft
    )
    await runner.run_model_step(planning)
    assert model.requests[-1].tool_choice is ModelToolChoice.AUTO
    assert "1. [pending] Back up" in ScriptedModelClient.user_texts(model.requests[-1])[0]

    active = dataclasses.replace(draft, status=PlanStatus.ACTIVE)
    executing = dataclasses.replace(
        session.context(), interaction_mode=InteractionMode.EXECUTING, plan=active
    )
    await runner.run_model_step(executing)
    request = model.requests[-1]
    assert [tool.name for tool in request.tools] == [
        "lookup_order",
        "refund_order",
        "ask_user",
        "write_todos",
    ]
    assert request.tool_choice is ModelToolChoice.AUTO
    assert request.input[0] == ModelUserText(
        build_plan_note(active, InteractionMode.EXECUTING) or ""
    )
