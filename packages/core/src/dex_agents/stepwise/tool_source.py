"""Tool sources: tools listed at run time, such as an MCP server's tools.

This phase accepts and validates tool sources in ``AgentDefinition``; the runner lists and routes
their tools in a later phase.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from dex_agents.stepwise._json_schema import JsonSchema
from dex_agents.tool_policy import ToolEffect

__all__ = ["ListedTool", "ToolSource", "declared_tool_names", "validate_tool_sources"]

_REQUIRED_METHODS = (
    "list_tools",
    "deferred_tool_call",
    "execute_deferred_tool_call",
    "poll_tool_task",
)


@dataclass(frozen=True)
class ListedTool:
    """One tool a source lists: what the model sees, and the effect its metadata declares."""

    name: str
    description: str
    parameters: JsonSchema
    framework_effect: ToolEffect | None = None


@runtime_checkable
class ToolSource(Protocol):
    """Tools listed at run time. Any object with these members is a ToolSource.

    ``source_name`` must be unique within an agent and stable across deploys, because stored
    calls name their source.
    """

    @property
    def source_name(self) -> str:
        """The source's stable name."""
        ...

    async def list_tools(self) -> Sequence[ListedTool]:
        """Lists the tools to offer in this model call."""
        ...

    def deferred_tool_call(self, *args: object, **kwargs: object) -> object:
        """Builds the DeferredToolCall of one call of a listed tool."""
        ...

    async def execute_deferred_tool_call(self, *args: object, **kwargs: object) -> object:
        """Runs one call of the source's tools in its tool Step."""
        ...

    async def poll_tool_task(self, *args: object, **kwargs: object) -> object:
        """Polls a task that one of the source's tools started."""
        ...


def validate_tool_sources(sources: Sequence[object]) -> tuple[object, ...]:
    """Checks that every source has the ToolSource members and that names are unique.

    Returns the sources as a tuple, in order.

    Raises:
        TypeError: When a source lacks a member or its ``source_name`` is not text.
        ValueError: When a ``source_name`` is blank or two sources share one.
    """
    names: set[str] = set()
    for index, source in enumerate(sources):
        missing = [name for name in _REQUIRED_METHODS if not callable(getattr(source, name, None))]
        if missing:
            raise TypeError(
                f"tool_sources[{index}] is not a ToolSource: it has no {', '.join(missing)}"
            )
        source_name = getattr(source, "source_name", None)
        if not isinstance(source_name, str):
            raise TypeError(f"tool_sources[{index}].source_name must be a str, got {source_name!r}")
        if not source_name.strip():
            raise ValueError(f"tool_sources[{index}].source_name must not be blank")
        if source_name in names:
            raise ValueError(f"two tool sources are named {source_name}")
        names.add(source_name)
    return tuple(sources)


def declared_tool_names(source: object) -> tuple[str, ...]:
    """The names a source always lists, from its optional ``declared_tool_names()``."""
    declare = getattr(source, "declared_tool_names", None)
    if not callable(declare):
        return ()
    return tuple(str(name) for name in declare())
