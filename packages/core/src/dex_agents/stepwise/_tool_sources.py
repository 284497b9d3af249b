"""Tool sources: tools listed at run time, such as an MCP server's tools.

In every RunModel of a chat or executing turn, the runner lists each source (at most
``tool_source_listing_timeout`` each) and offers its tools after the function tools. A call of a
listed tool becomes the source's ``deferred_tool_call``; the runner wraps the source's reference as
``{"stepwise_tool_source": <source_name>, "reference": ...}`` so the tool Step and PollToolTask reach
the source that built the call, on any Worker, without listing it again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import timedelta

from dex_agents._tool_source import ListedTool, ToolSource
from dex_agents.exceptions import ConfigurationError, ConfigurationTypeError
from dex_agents.stepwise._model_client import ModelToolDefinition

__all__ = [
    "ListedTool",
    "ToolSource",
    "declared_tool_names",
    "list_source_tools",
    "listed_tool_definition",
    "validate_tool_sources",
]

_LOG = logging.getLogger("dex_agents.stepwise")
_REQUIRED_METHODS = (
    "list_tools",
    "deferred_tool_call",
    "execute_deferred_tool_call",
    "poll_tool_task",
)


def listed_tool_definition(tool: ListedTool) -> ModelToolDefinition:
    """The definition of a listed tool offered to the model."""
    return ModelToolDefinition(tool.name, tool.description, dict(tool.parameters))


def validate_tool_sources(sources: Sequence[object]) -> tuple[ToolSource, ...]:
    """Checks that every source has the ToolSource members and that names are unique.

    Raises:
        ConfigurationTypeError: When a source lacks a member or its ``source_name`` is not text.
        ConfigurationError: When a ``source_name`` is blank or two sources share one.
    """
    names: set[str] = set()
    checked: list[ToolSource] = []
    for index, source in enumerate(sources):
        missing = [name for name in _REQUIRED_METHODS if not callable(getattr(source, name, None))]
        if missing:
            raise ConfigurationTypeError(
                f"tool_sources[{index}] is not a ToolSource: it has no {', '.join(missing)}"
            )
        source_name = getattr(source, "source_name", None)
        if not isinstance(source_name, str):
            raise ConfigurationTypeError(
                f"tool_sources[{index}].source_name must be a str, got {source_name!r}"
            )
        if not source_name.strip():
            raise ConfigurationError(f"tool_sources[{index}].source_name must not be blank")
        if source_name in names:
            raise ConfigurationError(f"two tool sources are named {source_name}")
        names.add(source_name)
        checked.append(source)  # type: ignore[arg-type]
    return tuple(checked)


def declared_tool_names(source: object) -> tuple[str, ...]:
    """The names a source always lists, from its optional ``declared_tool_names()``."""
    declare = getattr(source, "declared_tool_names", None)
    if not callable(declare):
        return ()
    return tuple(str(name) for name in declare())


async def list_source_tools(
    sources: Sequence[ToolSource], timeout: timedelta
) -> list[tuple[ToolSource, tuple[ListedTool, ...]]]:
    """Lists every source concurrently; a source that raises or is too slow lists nothing.

    A down server must never fail a turn, so its failure is a warning log only.
    """

    async def list_one(source: ToolSource) -> tuple[ListedTool, ...]:
        try:
            listed = await asyncio.wait_for(source.list_tools(), timeout.total_seconds())
            return tuple(_checked_listed_tool(source, tool) for tool in listed)
        except Exception as error:
            _LOG.warning(
                "tool source %s offers no tools in this model call: %s",
                source.source_name,
                "its listing took longer than the timeout"
                if isinstance(error, TimeoutError)
                else repr(error),
            )
            return ()

    listings = await asyncio.gather(*(list_one(source) for source in sources))
    return list(zip(sources, listings, strict=True))


def _checked_listed_tool(source: ToolSource, tool: object) -> ListedTool:
    if not isinstance(tool, ListedTool):
        raise ConfigurationTypeError(
            f"tool source {source.source_name} listed {type(tool).__name__}, not a ListedTool"
        )
    return tool
