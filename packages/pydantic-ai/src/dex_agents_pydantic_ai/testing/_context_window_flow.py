"""The long session past a small context window (``ContextWindowSessionScenario``) on Pydantic AI."""

from __future__ import annotations

from typing import Final

from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    AgentSessionFlow,
    AgentSessionOptions,
    ToolEffect,
)
from dex_agents.testing import ContextWindowModel
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo

from dex_agents_pydantic_ai._runner import PydanticAIRunner
from dex_agents_pydantic_ai._tool_policies import dex_tool_metadata
from dex_agents_pydantic_ai.testing._scripted_model import (
    measured_input_tokens,
    scripted_function_model,
    turn_view,
)

__all__ = ["build_pydantic_ai_context_window_flow"]

_RESULT_PREFIX: Final = "Result of "


def build_pydantic_ai_context_window_flow(
    model: ContextWindowModel, options: AgentSessionOptions
) -> AgentSessionFlow:
    """The scenario agent as a Pydantic AI agent whose ``FunctionModel`` asks ``model``."""

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if info.instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
            return ModelResponse(parts=[TextPart(model.summarize(_summarized_results(messages)))])
        view = turn_view(messages)
        reply = model.respond(
            view.user_text, view.tool_outputs, measured_input_tokens(messages, info)
        )
        if reply.tool_argument is not None:
            call = ToolCallPart(
                ContextWindowModel.tool_name,
                {"topic": reply.tool_argument},
                tool_call_id=f"note-{view.model_call_index}",
            )
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart(reply.text or "")])

    async def lookup_note(topic: str) -> str:
        return ContextWindowModel.run_tool(topic)

    agent: Agent[None, str] = Agent(
        scripted_function_model(respond, model_name="context-window-script"),
        name="context-window",
        instructions=ContextWindowModel.instructions,
        tools=[
            Tool(
                lookup_note,
                name=ContextWindowModel.tool_name,
                description=ContextWindowModel.tool_description,
                metadata=dex_tool_metadata(ToolEffect.READ),
            )
        ],
    )
    return AgentSessionFlow(
        PydanticAIRunner(agent), flow_type=ContextWindowModel.flow_type, options=options
    )


def _summarized_results(messages: list[ModelMessage]) -> list[str]:
    """The tool results the summary prompt shows (the core renders ``Result of ...: <output>``)."""
    results: list[str] = []
    for message in messages:
        for part in message.parts:
            content = getattr(part, "content", None)
            if not isinstance(content, str):
                continue
            for line in content.splitlines():
                if line.startswith(_RESULT_PREFIX) and ": " in line:
                    results.append(line.split(": ", 1)[1])
    return results
