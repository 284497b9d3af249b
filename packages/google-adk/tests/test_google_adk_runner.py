"""GoogleAdkRunner against ADK's real Runner with a scripted BaseLlm, Step by Step."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    AgentPlan,
    AgentTodo,
    AgentToolCall,
    AgentToolCallStatus,
    ConfigurationError,
    ConfigurationTypeError,
    ContextSummaryRequest,
    InteractionMode,
    PlanStatus,
    RunnerContractError,
    TodoStatus,
    ToolCallsRequested,
    ToolEffect,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.testing import TurnContextBuilder
from dex_agents_google_adk import GoogleAdkRunner
from dex_agents_google_adk._model_call_plugin import ModelCallPlugin
from google.adk.agents import RunConfig
from google.adk.agents.llm_agent import LlmAgent
from google.adk.agents.run_config import StreamingMode  # type: ignore[attr-defined]
from google.adk.apps import App
from google.adk.apps.app import EventsCompactionConfig
from google.adk.code_executors import UnsafeLocalCodeExecutor
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from google_adk_test_support import (
    ScriptedLlm,
    call_reply,
    function_responses,
    text_reply,
)

TOOL_RUNS: list[str] = []


def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    TOOL_RUNS.append(order_id)
    return {"order_id": order_id, "status": "delivered"}


def _agent(model: ScriptedLlm, **fields: Any) -> LlmAgent:
    return LlmAgent(
        name="support",
        model=model,
        instruction="You help with orders.",
        tools=fields.pop("tools", [lookup_order]),
        **fields,
    )


def _record(call_id: str, output: str, tool_name: str = "lookup_order") -> AgentToolCall:
    return AgentToolCall(
        call_id, tool_name, "{}", ToolEffect.READ, False, AgentToolCallStatus.SUCCEEDED, "turn-1",
        0, output=output,
    )  # fmt: skip


async def test_one_model_call_per_step_and_the_results_come_back_as_function_responses() -> None:
    TOOL_RUNS.clear()
    model = ScriptedLlm(
        model="scripted",
        script=[
            call_reply(("lookup_order", {"order_id": "7"}), ("lookup_order", {"order_id": "8"})),
            text_reply("Both orders arrived."),
        ],
    )
    runner = GoogleAdkRunner(_agent(model))
    turns = TurnContextBuilder()
    turns.start_turn(runner.build_user_message("Where are orders 7 and 8?"))

    first = await runner.run_model_step(
        turns.context(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)})
    )

    assert isinstance(first, ToolCallsRequested)
    assert len(model.requests) == 1
    assert TOOL_RUNS == []  # deferred: no tool ran inside RunModel
    assert [(c.tool_name, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("lookup_order", {"order_id": "7"}),
        ("lookup_order", {"order_id": "8"}),
    ]
    assert all(c.policy.effect is ToolEffect.READ for c in first.tool_calls)
    assert [m.tool_call_id for m in first.new_messages] == [
        c.tool_call_id for c in first.tool_calls
    ]
    turns.store(first.new_messages)
    outputs = ['{"order_id":"7","status":"delivered"}', "lost in transit"]
    records = [_record(c.tool_call_id, o) for c, o in zip(first.tool_calls, outputs, strict=True)]

    second = await runner.run_model_step(
        turns.context(run_state=first.framework_run_state, records=records)
    )

    assert isinstance(second, TurnCompleted)
    assert len(model.requests) == 2
    # ADK strips its own "adk-" call IDs before the model sees the request.
    assert [(r.name, r.response) for r in function_responses(model.requests[1])] == [
        ("lookup_order", {"order_id": "7", "status": "delivered"}),
        ("lookup_order", {"result": "lost in transit"}),
    ]
    # The results are stored before the answer, in the commit of the turn's end.
    assert [(m.role.value, m.tool_output or m.text) for m in second.new_messages] == [
        ("tool", '{"order_id":"7","status":"delivered"}'),
        ("tool", "lost in transit"),
        ("assistant", "Both orders arrived."),
    ]
    assert TOOL_RUNS == []


async def test_streamed_text_reaches_the_events_and_usage_and_metadata_are_reported() -> None:
    def streamed(request: LlmRequest) -> list[LlmResponse]:
        chunks = [
            LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text=t)]), partial=True
            )
            for t in ("Hel", "lo")
        ]
        final = LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text="Hello")]),
            model_version="scripted-2026-01",
            finish_reason=types.FinishReason.STOP,
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=12,
                candidates_token_count=3,
                cached_content_token_count=4,
                thoughts_token_count=2,
            ),
        )
        return [*chunks, final]

    runner = GoogleAdkRunner(_agent(ScriptedLlm(model="scripted-model", script=[streamed])))
    turns = TurnContextBuilder()
    turns.start_turn(runner.build_user_message("hi"))

    outcome = await runner.run_model_step(turns.context())

    assert isinstance(outcome, TurnCompleted)
    assert [e.payload_json()["text"] for e in turns.events if e.type == "text_delta"] == [
        "Hel",
        "lo",
    ]
    usage = outcome.usage
    assert (usage.input_tokens, usage.output_tokens) == (12, 3)
    assert (usage.cached_input_tokens, usage.reasoning_tokens) == (4, 2)
    metadata = outcome.model_call_metadata
    assert metadata is not None
    assert (metadata.request_model, metadata.response_model) == (
        "scripted-model",
        "scripted-2026-01",
    )
    assert metadata.finish_reasons == ("stop",)
    assert (metadata.provider_name, metadata.response_id) == (None, None)


async def test_without_streaming_the_whole_text_is_one_delta() -> None:
    runner = GoogleAdkRunner(
        _agent(ScriptedLlm(model="m", script=[text_reply("All done.")])),
        run_config=RunConfig(streaming_mode=StreamingMode.NONE),
    )
    turns = TurnContextBuilder()
    turns.start_turn(runner.build_user_message("hi"))
    await runner.run_model_step(turns.context())
    assert [e.payload_json() for e in turns.events if e.type == "text_delta"] == [
        {"text": "All done."}
    ]


async def test_built_in_tools_are_offered_and_a_planning_turn_offers_only_write_todos() -> None:
    model = ScriptedLlm(model="m", script=[text_reply("ok")])
    runner = GoogleAdkRunner(_agent(model))
    turns = TurnContextBuilder()
    turns.start_turn(runner.build_user_message("plan the migration"))
    built_ins = frozenset({"ask_user", "write_todos"})

    await runner.run_model_step(turns.context(enabled_built_in_tools=built_ins))
    plan = AgentPlan(1, PlanStatus.DRAFT, (AgentTodo("Back up", TodoStatus.PENDING),))
    await runner.run_model_step(
        turns.context(
            enabled_built_in_tools=built_ins, interaction_mode=InteractionMode.PLANNING, plan=plan
        )
    )

    chat, planning = model.requests
    assert sorted(chat.tools_dict) == ["ask_user", "lookup_order", "write_todos"]
    assert sorted(planning.tools_dict) == ["write_todos"]
    texts = [p.text for c in planning.contents for p in c.parts or () if p.text]
    assert texts[-1] == "plan the migration"
    assert "Back up" in texts[-2]  # the plan note comes right before the turn's message


async def test_a_tool_named_like_an_enabled_built_in_tool_is_refused() -> None:
    def ask_user(question: str) -> str:
        """Ask."""
        return question

    runner = GoogleAdkRunner(
        _agent(ScriptedLlm(model="m", script=[text_reply("x")]), tools=[ask_user])
    )
    turns = TurnContextBuilder()
    turns.start_turn(runner.build_user_message("hi"))
    with pytest.raises(ConfigurationError, match="built-in tool"):
        await runner.run_model_step(turns.context(enabled_built_in_tools=frozenset({"ask_user"})))


async def test_adk_confirmation_becomes_the_sessions_approval_unless_a_policy_says_otherwise() -> (
    None
):
    def refund(order_id: str) -> str:
        """Refund an order."""
        return order_id

    model = ScriptedLlm(model="m", script=[call_reply(("refund", {"order_id": "7"}))])
    runner = GoogleAdkRunner(_agent(model, tools=[FunctionTool(refund, require_confirmation=True)]))
    turns = TurnContextBuilder()
    turns.start_turn(runner.build_user_message("refund 7"))

    confirmed = await runner.run_model_step(
        turns.context(default_tool_effect=ToolEffect.IDEMPOTENT_WRITE)
    )
    overridden = await runner.run_model_step(
        turns.context(tool_policies={"refund": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, False)})
    )

    assert isinstance(confirmed, ToolCallsRequested) and isinstance(overridden, ToolCallsRequested)
    assert confirmed.tool_calls[0].policy.requires_approval is True
    assert overridden.tool_calls[0].policy.requires_approval is False


class _McpLikeTool(BaseTool):
    """A tool carrying MCP annotations the way ADK's McpTool does (``raw_mcp_tool``)."""

    def __init__(self, name: str, annotations: dict[str, bool]) -> None:
        super().__init__(name=name, description=name)
        self.raw_mcp_tool = type("RawTool", (), {"annotations": annotations})()

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name, parameters_json_schema={"type": "object", "properties": {}}
        )


async def test_mcp_annotations_classify_a_tool_when_trusted() -> None:
    tools = [
        _McpLikeTool("search", {"readOnlyHint": True}),
        _McpLikeTool("tag", {"idempotentHint": True}),
    ]
    model = ScriptedLlm(model="m", script=[call_reply(("search", {}), ("tag", {}))])
    turns = TurnContextBuilder()
    turns.store([GoogleAdkRunner(_agent(model, tools=tools)).build_user_message("go")])

    trusted = await GoogleAdkRunner(_agent(model, tools=tools)).run_model_step(turns.context())
    untrusted = await GoogleAdkRunner(
        _agent(model, tools=tools), trust_mcp_tool_annotations=False
    ).run_model_step(turns.context())

    assert isinstance(trusted, ToolCallsRequested) and isinstance(untrusted, ToolCallsRequested)
    assert [c.policy.effect for c in trusted.tool_calls] == [
        ToolEffect.READ,
        ToolEffect.IDEMPOTENT_WRITE,
    ]
    assert {c.policy.effect for c in untrusted.tool_calls} == {ToolEffect.UNCLASSIFIED}


async def test_a_summary_is_one_model_call_with_the_summary_instructions_and_no_tools() -> None:
    model = ScriptedLlm(model="m", script=[text_reply("The user asked about orders.")])
    runner = GoogleAdkRunner(_agent(model))
    turns = TurnContextBuilder()
    turns.start_turn(runner.build_user_message("Where is order 7?"))
    request = ContextSummaryRequest(
        flow_id="session-1",
        turn_id="turn-2",
        attempt=1,
        previous_summary=None,
        messages=tuple(turns.messages),
        input_token_budget=2_000,
    )

    result = await runner.summarize_context(request)

    assert result.text == "The user asked about orders."
    (llm_request,) = model.requests
    assert llm_request.config.system_instruction == CONTEXT_SUMMARY_INSTRUCTIONS
    assert not llm_request.config.tools
    assert "Where is order 7?" in (llm_request.contents[0].parts or [types.Part()])[0].text  # type: ignore[operator]


def test_the_estimate_counts_messages_instructions_and_tool_declarations() -> None:
    model = ScriptedLlm(model="m", script=[text_reply("x")])
    bare = GoogleAdkRunner(LlmAgent(name="bare", model=model))
    full = GoogleAdkRunner(_agent(model))
    turns = TurnContextBuilder()
    turns.store([bare.build_user_message("hello " * 300)])

    assert bare.estimate_input_tokens(turns.context()) >= 600
    assert full.estimate_input_tokens(turns.context()) > bare.estimate_input_tokens(turns.context())


async def test_a_second_model_call_in_one_step_is_refused() -> None:
    plugin = ModelCallPlugin(built_in_tools=(), planning=False)
    request = LlmRequest()
    assert await plugin.before_model_callback(callback_context=None, llm_request=request) is None  # type: ignore[arg-type]
    with pytest.raises(RunnerContractError, match="second model call"):
        await plugin.before_model_callback(callback_context=None, llm_request=request)  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore:.*EventsCompactionConfig.*:UserWarning")
def test_agents_that_cannot_run_one_model_call_per_step_are_refused() -> None:
    model = ScriptedLlm(model="m", script=[text_reply("x")])
    helper = LlmAgent(name="helper", model=model)
    with pytest.raises(ConfigurationError, match=r"sub_agents.*AgentTool"):
        GoogleAdkRunner(LlmAgent(name="root", model=model, sub_agents=[helper]))
    with pytest.raises(ConfigurationError, match="UnsafeLocalCodeExecutor"):
        GoogleAdkRunner(
            LlmAgent(name="coder", model=model, code_executor=UnsafeLocalCodeExecutor())
        )
    with pytest.raises(ConfigurationError, match="events_compaction_config"):
        GoogleAdkRunner(
            App(
                name="app",
                root_agent=LlmAgent(name="a", model=model),
                events_compaction_config=EventsCompactionConfig(
                    compaction_interval=2, overlap_size=1
                ),
            )
        )
    with pytest.raises(ConfigurationError, match="streaming_mode"):
        GoogleAdkRunner(
            LlmAgent(name="a", model=model), run_config=RunConfig(streaming_mode=StreamingMode.BIDI)
        )
    with pytest.raises(ConfigurationTypeError, match="LlmAgent"):
        GoogleAdkRunner("not an agent")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="summary_max_output_tokens"):
        GoogleAdkRunner(LlmAgent(name="a", model=model), summary_max_output_tokens=0)
    with pytest.raises(ConfigurationError, match="user_id"):
        GoogleAdkRunner(LlmAgent(name="a", model=model), user_id=" ")


async def test_a_tool_context_key_outside_a_tool_step_is_refused() -> None:
    from dex_agents import NoDeferredToolExecutionError
    from dex_agents_google_adk import idempotency_key_for_tool_call

    with pytest.raises(NoDeferredToolExecutionError):
        idempotency_key_for_tool_call(ToolContext.__new__(ToolContext))


async def test_a_callback_that_answers_before_the_model_makes_no_model_call() -> None:
    def closed_on_sundays(callback_context: Any) -> types.Content:
        return types.Content(role="model", parts=[types.Part(text="We are closed today.")])

    model = ScriptedLlm(model="m", script=[text_reply("never")])
    runner = GoogleAdkRunner(_agent(model, before_agent_callback=closed_on_sundays))
    turns = TurnContextBuilder()
    turns.start_turn(runner.build_user_message("hi"))

    outcome = await runner.run_model_step(turns.context())

    assert isinstance(outcome, TurnCompleted)
    assert [m.text for m in outcome.new_messages] == ["We are closed today."]
    assert outcome.usage.model_calls == 0 and model.requests == []
