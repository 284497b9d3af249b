"""The agent's ``tool_use_behavior``, applied when the deferred calls' results come back.

The SDK checks it right after running the tools, before the next model call; here the tools ran in
their own Steps, so the next ``RunModel`` checks it before it calls the model.
"""

from __future__ import annotations

import inspect
from typing import Any

from agents import Agent, FunctionToolResult, RunContextWrapper, ToolsToFinalOutputResult

from dex_agents_openai_agents._model_input import PendingResult
from dex_agents_openai_agents._prepared_agent import function_tools

__all__ = ["tool_results_end_turn"]


async def tool_results_end_turn(
    agent: Agent[Any], pending: list[PendingResult], context: object
) -> bool:
    """Whether the agent's ``tool_use_behavior`` makes these tool results the turn's final output.

    Only results of the agent's own function tools count, as in the SDK: after a handoff the new
    agent runs.
    """
    behavior = agent.tool_use_behavior
    if behavior == "run_llm_again":
        return False
    own = function_tools(agent)
    results = [r for r in pending if r.call.tool_name in own and r.call.agent == agent.name]
    if not results:
        return False
    if behavior == "stop_on_first_tool":
        return True
    if isinstance(behavior, dict):
        stop_names = set(behavior.get("stop_at_tool_names", ()))
        return any(result.call.tool_name in stop_names for result in results)
    if callable(behavior):
        verdict = behavior(
            RunContextWrapper(context),
            [
                FunctionToolResult(tool=own[r.call.tool_name], output=r.output, run_item=None)
                for r in results
            ],
        )
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return isinstance(verdict, ToolsToFinalOutputResult) and verdict.is_final_output
    return False
