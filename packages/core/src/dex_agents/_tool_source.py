"""Tool sources: tools listed at run time, such as an MCP server's tools.

A ``ToolSource`` lists its tools for each model call and builds, runs and polls the calls of
them, so any runner (Stepwise, an adapter, the MCP source) shares one shape. A source's calls are
deferred like every other tool call: its ``deferred_tool_call`` sets the policy and an opaque
``tool_source_reference`` that lets the tool Step reach the tool on any Worker without listing it
again.

Example:
    >>> from dex_agents import ToolExecutionError, ToolExecutionResult
    >>> class Weather:
    ...     source_name = "weather"
    ...     async def list_tools(self) -> list[ListedTool]:
    ...         return [ListedTool("forecast", "Tomorrow's forecast.", {"type": "object"},
    ...                            framework_effect=ToolEffect.READ)]
    ...     def deferred_tool_call(self, turn, tool_call_id, arguments, listed_tool):
    ...         policy = turn.resolve_tool_policy(listed_tool.name, listed_tool.framework_effect)
    ...         return DeferredToolCall(tool_call_id, listed_tool.name, arguments, policy)
    ...     async def execute_deferred_tool_call(self, call):
    ...         return ToolExecutionResult("sunny")
    ...     async def poll_tool_task(self, poll):
    ...         raise ToolExecutionError("weather starts no tasks")
    >>> isinstance(Weather(), ToolSource)
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from dex_agents._json_values import JsonValue
from dex_agents._runner_contract import (
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolTaskPoll,
    ToolTaskPollOutcome,
)
from dex_agents._tool_policy import ToolEffect

__all__ = ["ListedTool", "ToolSource"]


@dataclass(frozen=True)
class ListedTool:
    """One tool a source lists: what the model sees, and the effect its metadata declares.

    Attributes:
        name: The tool name offered to the model.
        description: The tool's description.
        parameters: The JSON Schema of the tool's arguments (an object schema).
        framework_effect: The effect the tool's metadata declares (MCP ``readOnlyHint`` gives
            ``READ``), or ``None``; an explicit ``ToolPolicy`` wins over it.
    """

    name: str
    description: str
    parameters: Mapping[str, JsonValue] = field(default_factory=dict)
    framework_effect: ToolEffect | None = None


@runtime_checkable
class ToolSource(Protocol):
    """Tools listed at run time. Any object with these members is a ToolSource.

    ``source_name`` must be unique within an agent and stable across deploys, because stored calls
    name their source. Optional members: ``declared_tool_names()``, names the source always lists;
    ``cached_tools()``, its last listing without I/O; ``cancel_tool_task(cancellation)``.
    """

    @property
    def source_name(self) -> str:
        """The source's stable name."""
        ...

    async def list_tools(self) -> Sequence[ListedTool]:
        """Lists the tools to offer in this model call."""
        ...

    def deferred_tool_call(
        self, turn: AgentTurnContext, tool_call_id: str, arguments: str, listed_tool: ListedTool
    ) -> DeferredToolCall:
        """Builds the DeferredToolCall of one call of ``listed_tool``, the definition offered.

        Its ``policy`` comes from ``turn.resolve_tool_policy``, and its ``tool_source_reference``
        is the source's own.
        """
        ...

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Runs one call of the source's tools in its tool Step, with the source's own reference."""
        ...

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Polls a task that one of the source's tools started."""
        ...
