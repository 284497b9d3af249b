"""The capability the runner adds to every Pydantic AI run it drives inside a Step.

It sees each model request the run makes: it records the tool definitions offered (output tools
too, so the runner tells a structured answer from a tool call) and the model that serves it, keeps a
planning turn's tools to ``write_todos``, and refuses a second model request in one Step, which the
runner's node loop never starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dex_agents import BuiltInTool, RunnerContractError
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.tools import RunContext, ToolDefinition

__all__ = ["StepCapability"]


@dataclass
class StepCapability(AbstractCapability[Any]):
    """Per-run observer and guard; build a new one for each run."""

    planning: bool = False
    function_tools: dict[str, ToolDefinition] = field(default_factory=dict)
    output_tools: dict[str, ToolDefinition] = field(default_factory=dict)
    instructions: str = ""
    model: Model | None = None
    model_requests: int = 0

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        if self.planning:
            # A planning turn writes the plan and nothing else.
            return [tool for tool in tool_defs if tool.name == BuiltInTool.WRITE_TODOS.value]
        return tool_defs

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        self.model_requests += 1
        if self.model_requests > 1:
            raise RunnerContractError(
                "Pydantic AI started a second model request in one RunModel Step; the runner "
                "makes exactly one per Step"
            )
        parameters = request_context.model_request_parameters
        self.function_tools = {tool.name: tool for tool in parameters.function_tools}
        self.output_tools = {tool.name: tool for tool in parameters.output_tools}
        self.instructions = "\n\n".join(
            part.content for part in parameters.instruction_parts or () if part.content
        )
        self.model = request_context.model
        return request_context
