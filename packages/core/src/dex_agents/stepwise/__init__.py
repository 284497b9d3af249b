"""Stepwise mode: dex-agents' own agent loop, for agents defined in Dex terms without a framework.

``StepwiseAgentRunner`` implements the runner contract, so the session Flow, its Steps, approvals,
and events are the ones every adapter uses. Each ``RunModel`` makes exactly one model call through
a ``ModelClient``, and every tool call is its own Step.

Example:
    >>> from dex_agents import ToolEffect
    >>> @function_tool(effect=ToolEffect.READ)
    ... async def lookup_order(order_id: str) -> dict[str, str]:
    ...     '''Look up an order by its ID.'''
    ...     return await orders.get(order_id)
    >>> support_agent = AgentDefinition(
    ...     name="support",
    ...     instructions="You help customers with their orders.",
    ...     model=ScriptedModelClient(lambda request: ScriptedModelReply(text="Hello")),
    ...     tools=[lookup_order],
    ... )
    >>> flow = stepwise_agent_session_flow(support_agent, flow_type="SupportAgent")
"""

from dex_agents.stepwise._agent_definition import (
    DEFAULT_MAX_MODEL_CALLS_PER_TURN,
    DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT,
    AgentDefinition,
    InstructionContext,
    Instructions,
    PlanningToolChoice,
)
from dex_agents.stepwise._function_tool import FunctionTool, ToolCallContext, function_tool
from dex_agents.stepwise._model_client import (
    DiscardingModelOutputWriter,
    ModelClient,
    ModelInputItem,
    ModelOutputItem,
    ModelOutputItemKind,
    ModelOutputWriter,
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    ModelToolChoice,
    ModelToolDefinition,
    ModelToolResult,
    ModelUserText,
    replayable_input,
)
from dex_agents.stepwise._runner import (
    StepwiseAgentRunner,
    model_call_limit_tool_result,
    unknown_tool_message,
)
from dex_agents.stepwise._scripted_model_client import (
    SCRIPTED_PROVIDER,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedRespond,
    ScriptedToolCall,
)
from dex_agents.stepwise._session_flow import (
    stepwise_agent_session_flow,
    stepwise_agent_session_options,
)
from dex_agents.stepwise._tool_sources import ListedTool, ToolSource

__all__ = [
    "DEFAULT_MAX_MODEL_CALLS_PER_TURN",
    "DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT",
    "SCRIPTED_PROVIDER",
    "AgentDefinition",
    "DiscardingModelOutputWriter",
    "FunctionTool",
    "InstructionContext",
    "Instructions",
    "ListedTool",
    "ModelClient",
    "ModelInputItem",
    "ModelOutputItem",
    "ModelOutputItemKind",
    "ModelOutputWriter",
    "ModelRequest",
    "ModelResponse",
    "ModelToolCall",
    "ModelToolChoice",
    "ModelToolDefinition",
    "ModelToolResult",
    "ModelUserText",
    "PlanningToolChoice",
    "ScriptedModelClient",
    "ScriptedModelReply",
    "ScriptedRespond",
    "ScriptedToolCall",
    "StepwiseAgentRunner",
    "ToolCallContext",
    "ToolSource",
    "function_tool",
    "model_call_limit_tool_result",
    "replayable_input",
    "stepwise_agent_session_flow",
    "stepwise_agent_session_options",
    "unknown_tool_message",
]
