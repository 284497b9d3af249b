"""The agents of one session: the starting agent and every agent a handoff can reach, by name.

A session stores which agent is active by name only (see ``_transcript``), so every Worker must
find the same agent for a name. The graph walks the starting agent's handoffs once, when the runner
is built, and checks what the adapter cannot run durably.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from agents import (
    Agent,
    CodeInterpreterTool,
    FileSearchTool,
    FunctionTool,
    Handoff,
    HostedMCPTool,
    ImageGenerationTool,
    RunConfig,
    ToolSearchTool,
    WebSearchTool,
    handoff,
)
from dex_agents import ConfigurationError, ConfigurationTypeError
from dex_agents.adapters import agent_type_error

__all__ = ["AgentGraph", "agent_handoffs", "check_run_config"]

# Tools the model provider runs inside the model call itself: nothing for a tool Step to run.
_PROVIDER_TOOL_TYPES: Final = (
    CodeInterpreterTool,
    FileSearchTool,
    HostedMCPTool,
    ImageGenerationTool,
    ToolSearchTool,
    WebSearchTool,
)


@dataclass(frozen=True)
class AgentGraph:
    """Every agent of a session by name; the first is the starting agent.

    Raises:
        ConfigurationTypeError: When an agent or an extra agent is not an ``agents.Agent``.
        ConfigurationError: When two agents share a name, a handoff filters the next agent's input,
            or an agent has a tool that runs on this machine but is not a ``FunctionTool``.
    """

    starting_agent: Agent[Any]
    by_name: Mapping[str, Agent[Any]]

    @classmethod
    def build(
        cls, starting_agent: Agent[Any], extra_agents: Iterable[Agent[Any]] = ()
    ) -> AgentGraph:
        """Walk the handoffs of ``starting_agent`` and of ``extra_agents``."""
        by_name: dict[str, Agent[Any]] = {}
        pending = [starting_agent, *extra_agents]
        while pending:
            agent = pending.pop(0)
            if not isinstance(agent, Agent):
                raise agent_type_error("OpenAIAgentsRunner", "agents.Agent instances", agent)
            known = by_name.get(agent.name)
            if known is agent:
                continue
            if known is not None:
                raise ConfigurationError(
                    f"two different agents are named {agent.name!r}; a session stores the active "
                    "agent by name, so every agent reachable by a handoff needs its own name"
                )
            _check_tools(agent)
            by_name[agent.name] = agent
            pending.extend(_handoff_targets(agent))
        return cls(starting_agent, by_name)

    def agent(self, name: str) -> Agent[Any]:
        """The agent named ``name``.

        Raises:
            ConfigurationError: When no agent of the graph has that name.
        """
        agent = self.by_name.get(name)
        if agent is None:
            raise ConfigurationError(
                f"agent {name!r} is not reachable from agent {self.starting_agent.name!r} by a "
                "handoff on this Worker; pass it in OpenAIAgentsRunner(agents=...) when a custom "
                "Handoff returns it"
            )
        return agent


def check_run_config(run_config: RunConfig) -> None:
    """Reject run settings that rewrite the history a handoff passes on.

    Raises:
        ConfigurationError: When the run config filters or nests handoff history.
    """
    if run_config.handoff_input_filter is not None or run_config.nest_handoff_history:
        raise ConfigurationError(
            "RunConfig.handoff_input_filter and nest_handoff_history are not supported: the "
            "session replays its stored messages to every model call, so a handoff cannot rewrite "
            "them; leave both unset"
        )


def agent_handoffs(agent: Agent[Any]) -> dict[str, Handoff[Any, Any]]:
    """The agent's handoffs by tool name, as the SDK offers them to the model."""
    entries = [entry if isinstance(entry, Handoff) else handoff(entry) for entry in agent.handoffs]
    return {entry.tool_name: entry for entry in entries}


def _handoff_targets(agent: Agent[Any]) -> list[Agent[Any]]:
    targets: list[Agent[Any]] = []
    for entry in agent.handoffs:
        if isinstance(entry, Agent):
            targets.append(entry)
            continue
        if not isinstance(entry, Handoff):
            raise ConfigurationTypeError(
                f"agent {agent.name!r} has a handoff of type {type(entry).__name__}; use an Agent "
                "or agents.handoff(...)"
            )
        if entry.input_filter is not None or entry.nest_handoff_history:
            raise ConfigurationError(
                f"handoff {entry.tool_name!r} of agent {agent.name!r} filters or nests the next "
                "agent's input, which a durable session cannot do: it replays its stored messages "
                "to every model call; remove input_filter and nest_handoff_history"
            )
        # handoff(agent) keeps a weak reference to its target; a custom Handoff may not, and then
        # its target comes from OpenAIAgentsRunner(agents=...).
        reference: weakref.ReferenceType[Any] | None = getattr(entry, "_agent_ref", None)
        target = reference() if reference is not None else None
        if isinstance(target, Agent):
            targets.append(target)
    return targets


def _check_tools(agent: Agent[Any]) -> None:
    for tool in agent.tools:
        if isinstance(tool, (FunctionTool, *_PROVIDER_TOOL_TYPES)):
            continue
        raise ConfigurationError(
            f"tool {getattr(tool, 'name', type(tool).__name__)!r} of agent {agent.name!r} is a "
            f"{type(tool).__name__}, which runs on this machine outside a FunctionTool; "
            "dex-agents-openai-agents defers FunctionTools to their own Steps and lets the model "
            "provider run hosted tools, so wrap this one in a function_tool"
        )
