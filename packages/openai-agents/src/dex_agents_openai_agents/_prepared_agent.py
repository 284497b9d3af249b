"""The agent one model call runs: the user's agent, changed only so that no tool runs inside it.

Every ``FunctionTool`` is copied with ``needs_approval=True``, so the SDK stops before its body;
the session's built-in tools are offered as function tools of the same kind; a planning turn
offers ``write_todos`` alone. The copy never runs a tool: ``execute_deferred_tool_call`` runs the
user's original tool later, in its own Step.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from typing import Any

from agents import Agent, FunctionTool, ModelSettings, RunContextWrapper, Tool
from dex_agents import (
    BUILT_IN_TOOL_DEFINITIONS,
    BuiltInTool,
    ConfigurationError,
    InteractionMode,
    RunnerContractError,
)

__all__ = ["function_tools", "prepare_agent"]


def function_tools(agent: Agent[Any]) -> dict[str, FunctionTool]:
    """The agent's own function tools by name."""
    return {tool.name: tool for tool in agent.tools if isinstance(tool, FunctionTool)}


def prepare_agent(
    agent: Agent[Any],
    *,
    enabled_built_in_tools: Iterable[str],
    interaction_mode: InteractionMode,
    resuming: bool,
    reset_tool_choice: bool,
) -> Agent[Any]:
    """The copy of ``agent`` for one model call.

    ``resuming`` drops the input guardrails, which the SDK runs once per run, on the first model
    call: a session turn is one SDK run. ``reset_tool_choice`` clears a forced tool choice after
    the agent used tools in this turn, as the SDK does within a run.

    Raises:
        ConfigurationError: When a function tool uses the name of an enabled built-in tool.
    """
    enabled = frozenset(str(name) for name in enabled_built_in_tools)
    own = function_tools(agent)
    clash = sorted(enabled & set(own))
    if clash:
        raise ConfigurationError(
            f"tool {clash[0]!r} of agent {agent.name!r} uses the name of a built-in tool this "
            "session enables; rename the tool or leave the built-in tool out of built_in_tools"
        )
    changes: dict[str, Any] = {"tool_use_behavior": "run_llm_again"}
    if interaction_mode is InteractionMode.PLANNING:
        # A planning turn writes the plan and nothing else.
        changes.update(
            tools=_built_in_tools(enabled & {BuiltInTool.WRITE_TODOS.value}),
            handoffs=[],
            mcp_servers=[],
        )
    else:
        changes["tools"] = [*(_deferred(tool) for tool in agent.tools), *_built_in_tools(enabled)]
    if resuming:
        changes["input_guardrails"] = []
    if reset_tool_choice and agent.reset_tool_choice and agent.model_settings.tool_choice:
        changes["model_settings"] = _without_tool_choice(agent.model_settings)
    return agent.clone(**changes)


def _deferred(tool: Tool) -> Tool:
    if not isinstance(tool, FunctionTool):
        return tool  # a hosted tool: the provider runs it inside the model call
    deferred = copy.copy(tool)
    deferred.needs_approval = True
    return deferred


def _built_in_tools(enabled: frozenset[str]) -> list[Tool]:
    return [
        FunctionTool(
            name=definition.name.value,
            description=definition.description,
            params_json_schema=copy.deepcopy(definition.parameters),
            on_invoke_tool=_session_routed,
            needs_approval=True,
        )
        for definition in BUILT_IN_TOOL_DEFINITIONS
        if definition.name.value in enabled
    ]


async def _session_routed(context: RunContextWrapper[Any], arguments: str) -> str:
    raise RunnerContractError(
        "a built-in tool ran inside the SDK; the session routes built-in tool calls to their own "
        "Steps, so this is a defect of dex-agents-openai-agents"
    )


def _without_tool_choice(settings: ModelSettings) -> ModelSettings:
    return dataclasses.replace(settings, tool_choice=None)
