"""The deferred calls of one model response: how each call of the response reaches a tool Step.

Every function call becomes a ``DeferredToolCall`` whose record names the agent
(``CallReference``), so its tool Step finds the tool after a handoff; calls that the SDK already
answered inside ``RunModel`` carry that answer and only record it.
"""

from __future__ import annotations

import json
from typing import Any, Final

from agents import Agent, FunctionTool, Handoff, RunContextWrapper
from dex_agents import (
    AgentTurnContext,
    DeferredToolCall,
    JsonObject,
    ResolvedToolPolicy,
    ToolEffect,
    tool_effect_from_mcp_tool_annotations,
)
from dex_agents.adapters import UNKNOWN_TOOL_POLICY, unknown_tool_error

from dex_agents_openai_agents._agent_graph import AgentGraph, agent_handoffs
from dex_agents_openai_agents._call_reference import CallReference
from dex_agents_openai_agents._model_step import ModelCallResult
from dex_agents_openai_agents._prepared_agent import function_tools

__all__ = ["defer_calls", "find_tool"]

# A call the SDK already answered inside RunModel: its tool Step only records that answer.
_RECORD_ONLY_POLICY: Final = ResolvedToolPolicy(ToolEffect.READ, requires_approval=False)
# The SDK's own text for every handoff of a response after the first, which it ignores.
_IGNORED_HANDOFF_OUTPUT: Final = "Multiple handoffs detected, ignoring this one."


async def defer_calls(
    graph: AgentGraph,
    turn: AgentTurnContext,
    agent: Agent[Any],
    calls: list[JsonObject],
    result: ModelCallResult,
    context: object,
) -> tuple[list[DeferredToolCall], str]:
    """One ``DeferredToolCall`` per function call of the response, and the agent of the next call.

    - A built-in tool: read and unapproved; the session routes it.
    - A call the SDK stopped before (its approval interruption): the tool's policy; its Step runs
      the tool.
    - A handoff: recorded as the SDK's transfer output; the first one switches the agent.
    - A tool of the agent's MCP servers, which the SDK ran inline: its Step records the output.
    - Anything else, such as a tool the model made up: its Step fails with the SDK's error.

    Raises:
        ConfigurationError: When a handoff leads to an agent unknown to this runner.
    """
    handoffs = agent_handoffs(agent)
    next_agent = agent.name
    handoff_taken = False
    deferred: list[DeferredToolCall] = []
    for item in calls:
        call_id, name, arguments = (
            str(item.get("call_id")),
            str(item.get("name")),
            str(item.get("arguments") or ""),
        )
        reference = CallReference(agent.name)
        if name in turn.enabled_built_in_tools:
            # The session routes built-in calls to their own Steps, read and unapproved.
            policy = turn.resolve_tool_policy(name, ToolEffect.READ)
        elif call_id in result.interrupted_call_ids:
            tool = await find_tool(agent, name, context)
            policy = await _policy(turn, name, tool, arguments, call_id, context)
        elif name in handoffs:
            output, target = await _handoff_outcome(
                graph, handoffs[name], call_id, arguments, result, context, handoff_taken
            )
            reference = CallReference(agent.name, inline_output=output, handoff_to=target)
            policy = _RECORD_ONLY_POLICY
            if target is not None:
                next_agent, handoff_taken = target, True
        elif call_id in result.inline_outputs and call_id not in result.calls_without_origin:
            # A tool of the agent's MCP servers, which the SDK ran inside RunModel.
            reference = CallReference(agent.name, inline_output=result.inline_outputs[call_id])
            policy = _RECORD_ONLY_POLICY
        else:
            # A tool the model made up: the kit's text, not the SDK's, as in every runner.
            error = str(unknown_tool_error(name))
            reference = CallReference(agent.name, unknown_tool_error=error)
            policy = UNKNOWN_TOOL_POLICY
        deferred.append(DeferredToolCall(call_id, name, arguments, policy, reference.encode()))
    return deferred, next_agent


async def _handoff_outcome(
    graph: AgentGraph,
    handoff: Handoff[Any, Any],
    call_id: str,
    arguments: str,
    result: ModelCallResult,
    context: object,
    handoff_taken: bool,
) -> tuple[str, str | None]:
    """The output of one handoff call, and the agent it hands off to when it takes effect.

    The SDK runs a handoff inline; when the response also asked for function tools, it leaves
    the handoff for after them, and this runner invokes it the same way. Only the first handoff
    of a response takes effect, as in the SDK.

    Raises:
        ConfigurationError: When the target agent is unknown to this runner.
    """
    if call_id == result.handoff_call_id and result.handoff_target is not None:
        target = graph.agent(result.handoff_target).name
        return result.inline_outputs[call_id], target
    if call_id in result.inline_outputs or handoff_taken:
        return result.inline_outputs.get(call_id, _IGNORED_HANDOFF_OUTPUT), None
    next_agent = await handoff.on_invoke_handoff(RunContextWrapper(context), arguments)
    target = graph.agent(next_agent.name).name
    return handoff.get_transfer_message(next_agent), target


async def find_tool(agent: Agent[Any], name: str, context: object) -> FunctionTool | None:
    """The agent's function tool, else a tool of its MCP servers, named ``name``."""
    tool = function_tools(agent).get(name)
    if tool is not None or not agent.mcp_servers:
        return tool
    for listed in await agent.get_mcp_tools(RunContextWrapper(context)):
        if isinstance(listed, FunctionTool) and listed.name == name:
            return listed
    return None


async def _policy(
    turn: AgentTurnContext,
    name: str,
    tool: FunctionTool | None,
    arguments: str,
    call_id: str,
    context: object,
) -> ResolvedToolPolicy:
    """The session policy of a deferred call: an explicit policy wins, then MCP annotations for
    the effect; the tool's own ``needs_approval`` decides approval unless a policy names it."""
    if tool is None:
        return turn.resolve_tool_policy(name)
    annotations = tool.mcp_annotations
    effect = tool_effect_from_mcp_tool_annotations(annotations) if annotations is not None else None
    policy = turn.resolve_tool_policy(name, effect)
    if name in turn.tool_policies:
        return policy
    approval = await _needs_approval(tool, arguments, call_id, context)
    return policy if approval is None else ResolvedToolPolicy(policy.effect, approval)


async def _needs_approval(
    tool: FunctionTool, arguments: str, call_id: str, context: object
) -> bool | None:
    """The tool's own approval setting for this call; ``None`` when it leaves it to the session."""
    setting = tool.needs_approval
    if isinstance(setting, bool):
        return True if setting else None
    try:
        parameters = json.loads(arguments) if arguments else {}
    except ValueError:
        return True  # the SDK asks for approval of arguments it cannot inspect
    if not isinstance(parameters, dict):
        return True
    return bool(await setting(RunContextWrapper(context), parameters, call_id))
