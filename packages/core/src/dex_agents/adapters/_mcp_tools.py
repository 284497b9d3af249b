"""One factory for the MCP-tool wrappers of every adapter, given the framework's tool type.

An adapter offers the tools of a ``dex_agents.mcp.McpToolSource`` in its framework's own tool type
(a ``StructuredTool``, a ``FunctionTool``, a Pydantic AI ``Tool``, ...), each call running in its
own tool Step. What every adapter does alike is here once: checking the source and the listed
tool, listing the source, a fresh copy of the input schema, and the call with the call's
idempotency key. The adapter writes only ``wrap``: its tool type around an :class:`McpTool`.

The tools' effects come from the source's listing: pass
``{**source.tool_policies(), **your_policies}`` as ``AgentSessionOptions.tool_policies``. This
module never imports the MCP SDK, so an adapter imports without it; the source itself needs the
mcp extra (``pip install "dex-agents[mcp]"``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from dex_agents._event_writer import AgentEventWriter
from dex_agents._tool_source import ListedTool
from dex_agents.exceptions import ConfigurationError, ToolExecutionError

if TYPE_CHECKING:
    from dex_agents.mcp import McpToolSource

__all__ = ["McpTool", "McpToolFactory", "McpToolFunction", "McpToolSourceLike", "McpToolsFunction"]

ToolT = TypeVar("ToolT")
ToolT_co = TypeVar("ToolT_co", covariant=True)


class McpToolSourceLike(Protocol):
    """What a wrapper uses of ``dex_agents.mcp.McpToolSource``."""

    async def list_tools(self, refresh: bool = False) -> Sequence[ListedTool]: ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str,
        events: AgentEventWriter | None = None,
        tool_call_id: str | None = None,
    ) -> str: ...


class McpToolFunction(Protocol[ToolT_co]):
    """An adapter's public function that makes one listed tool of a source in its tool type
    (``McpToolFactory.public_functions``)."""

    def __call__(self, source: McpToolSource, tool: ListedTool) -> ToolT_co: ...


class McpToolsFunction(Protocol[ToolT]):
    """An adapter's public function that lists a source and makes each of its tools in its tool
    type (``McpToolFactory.public_functions``)."""

    async def __call__(self, source: McpToolSource, *, refresh: bool = False) -> list[ToolT]: ...


@dataclass(frozen=True)
class McpTool:
    """One listed tool of an MCP tool source, as a framework's wrapper needs it.

    Attributes:
        source: The source that listed the tool.
        listed: The tool as the source listed it.

    Example:
        A source here is anything that lists and calls tools as an ``McpToolSource`` does:

        >>> import asyncio
        >>> class Files:
        ...     async def list_tools(self, refresh=False):
        ...         return [ListedTool("files__read", "Reads a file.", {"type": "object"})]
        ...     async def call_tool(self, name, arguments=None, *, idempotency_key, **call):
        ...         return f"{name}: {arguments['path']} (key {idempotency_key})"
        >>> files = Files()
        >>> mcp = McpTool(files, asyncio.run(files.list_tools())[0])
        >>> mcp.name, mcp.json_schema()
        ('files__read', {'type': 'object'})
        >>> asyncio.run(mcp.call({"path": "a.txt"}, idempotency_key="call-1"))
        'files__read: a.txt (key call-1)'
    """

    source: McpToolSourceLike
    listed: ListedTool

    @property
    def name(self) -> str:
        """The tool's agent name (the server's prefix included where the source adds one)."""
        return self.listed.name

    @property
    def description(self) -> str:
        """The tool's description, as the server gave it."""
        return self.listed.description

    def json_schema(self) -> dict[str, Any]:
        """A fresh copy of the tool's input JSON Schema, which the framework may change."""
        return copy.deepcopy(dict(self.listed.parameters))

    async def call(
        self,
        arguments: Mapping[str, Any],
        *,
        idempotency_key: str,
        events: AgentEventWriter | None = None,
        tool_call_id: str | None = None,
        failure: Callable[[str], Exception] | None = None,
    ) -> str:
        """Calls the tool on its server now and returns its output text.

        Raises:
            ToolExecutionError: When the server answers with an error, unless ``failure`` is
                given: then ``failure(text)`` is raised from it (the framework's own failed tool
                result, such as LangChain's ``ToolException``).
            McpToolCallInterruptedError: When the call's outcome is unknown; it fails the tool
                Step, so the call's effect decides.
        """
        try:
            return await self.source.call_tool(
                self.name,
                arguments,
                idempotency_key=idempotency_key,
                events=events,
                tool_call_id=tool_call_id,
            )
        except ToolExecutionError as error:
            if failure is None:
                raise
            raise failure(str(error)) from error


class McpToolFactory(Generic[ToolT]):
    """Makes a framework's tools from the tools of an ``McpToolSource``.

    ``wrap`` turns one :class:`McpTool` into the framework's tool type; ``function_name`` is the
    adapter's public function that makes one tool, named in the error for a bad argument.

    Example:
        An adapter's ``wrap`` builds its framework's tool (LangChain's ``StructuredTool``, ...)
        around the ``McpTool``; here the tool type is a plain tuple, and the source one that
        lists and calls tools as an ``McpToolSource`` does:

        >>> import asyncio
        >>> def wrap(mcp: McpTool) -> tuple[str, str]:
        ...     return mcp.name, mcp.description
        >>> factory = McpToolFactory(wrap, function_name="mcp_tuple_tool")
        >>> class Files:
        ...     async def list_tools(self, refresh=False):
        ...         return [ListedTool("files__read", "Reads a file.", {"type": "object"})]
        ...     async def call_tool(self, name, arguments=None, *, idempotency_key, **call):
        ...         return "..."
        >>> asyncio.run(factory.listed_tools(Files()))
        [('files__read', 'Reads a file.')]

        With an ``McpToolSource``, ``await factory.tools(source)`` checks the source, then lists
        its servers the same way.
    """

    def __init__(self, wrap: Callable[[McpTool], ToolT], *, function_name: str) -> None:
        self._wrap = wrap
        self._function_name = function_name

    def tool(self, source: McpToolSource, listed: ListedTool) -> ToolT:
        """One listed tool of ``source`` in the framework's tool type.

        Raises:
            ConfigurationTypeError: When ``source`` is not an ``McpToolSource`` or ``listed`` is
                not a tool it listed (a ``ListedTool``).
        """
        from dex_agents.mcp import require_listed_tool, require_mcp_tool_source  # the mcp extra

        require_mcp_tool_source(source)
        require_listed_tool(listed, self._function_name)
        return self._wrap(McpTool(source, listed))

    async def tools(self, source: McpToolSource, *, refresh: bool = False) -> list[ToolT]:
        """Lists ``source`` and returns each of its tools in the framework's tool type.

        Afterwards ``source.tool_policies()`` knows the listed tools. ``refresh=True`` lists every
        server again now.

        Raises:
            ConfigurationTypeError: When ``source`` is not an ``McpToolSource``.
        """
        from dex_agents.mcp import require_mcp_tool_source  # needs the mcp extra

        require_mcp_tool_source(source)
        return await self.listed_tools(source, refresh=refresh)

    async def listed_tools(
        self, source: McpToolSourceLike, *, refresh: bool = False
    ) -> list[ToolT]:
        """Like :meth:`tools`, for anything that lists and calls tools as an ``McpToolSource``
        does (a framework's toolset that lists when the framework asks)."""
        return [self._wrap(McpTool(source, listed)) for listed in await source.list_tools(refresh)]

    def public_functions(
        self,
        tool_kind: str,
        *,
        example: str,
        note: str = "",
        tools_function: str | None = None,
    ) -> tuple[McpToolFunction[ToolT], McpToolsFunction[ToolT]]:
        """An adapter's two public functions, ``<function_name>(source, tool)`` (:meth:`tool`)
        and ``await <function_name>s(source, *, refresh=False)`` (:meth:`tools`), named for the
        module of ``wrap`` and documented alike in every adapter.

        ``tool_kind`` says what a tool becomes (``"a schema-only ``FunctionTool`` that runs in its
        tool Step"``); ``example`` is one line of the framework's code that takes a list of tools
        at ``{tools}``; ``note`` is a paragraph after the first line of the one-tool function's
        docstring (where its tools run, ...); ``tools_function`` names the listing function when
        it is not ``<function_name>s``.

        Raises:
            ConfigurationError: When ``example`` holds a ``{name}`` other than ``{tools}`` (the
                functions themselves raise as :meth:`tool` and :meth:`tools` do).

        Example:
            >>> def agent_name(mcp: McpTool) -> str:
            ...     return mcp.name
            >>> mcp_name, mcp_names = McpToolFactory(
            ...     agent_name, function_name="mcp_name"
            ... ).public_functions("its agent name", example="names = {tools}")
            >>> mcp_names.__qualname__
            'mcp_names'
            >>> "names = [*my_tools, *await mcp_names(tools)]" in mcp_names.__doc__
            True
        """
        factory = self
        module = getattr(self._wrap, "__module__", None) or __name__

        def tool(source: McpToolSource, tool: ListedTool) -> ToolT:
            return factory.tool(source, tool)

        async def tools(source: McpToolSource, *, refresh: bool = False) -> list[ToolT]:
            return await factory.tools(source, refresh=refresh)

        tool_name = self._function_name
        tools_name = tools_function or f"{tool_name}s"
        _name(tool, module, tool_name)
        _name(tools, module, tools_name)
        try:
            one = example.format(tools=f"[{tool_name}(tools, t) for t in tools.cached_tools()]")
            every = example.format(tools=f"[*my_tools, *await {tools_name}(tools)]")
        except (KeyError, IndexError) as error:
            raise ConfigurationError(
                f"the example of {tool_name} may hold only {{tools}}, got {example!r}"
            ) from error
        note = f"\n{note}\n" if note else ""
        tool.__doc__ = _TOOL_DOC.format(kind=tool_kind, note=note, example=one)
        tools.__doc__ = _TOOLS_DOC.format(kind=tool_kind, example=every)
        return tool, tools


def _name(function: Callable[..., object], module: str, name: str) -> None:
    function.__module__ = module
    function.__name__ = function.__qualname__ = name


_TOOL_DOC = """One listed tool of ``source`` as {kind}.
{note}
Raises:
    ConfigurationTypeError: When ``source`` is not an ``McpToolSource`` or ``tool`` is not a
        tool it listed (a ``ListedTool``).

Example:
    >>> await tools.list_tools()
    >>> {example}
"""

_TOOLS_DOC = """List ``source`` and return each of its tools as {kind}.

Afterwards ``source.tool_policies()`` knows the listed tools: merge it into the session's tool
policies. ``refresh=True`` lists every server again now.

Raises:
    ConfigurationTypeError: When ``source`` is not an ``McpToolSource``.

Example:
    >>> tools = McpToolSource([McpStdioServerConfig(name="files", command="mcp-server-files")])
    >>> {example}
    >>> options = AgentSessionOptions(tool_policies={{**tools.tool_policies(), **my_policies}})
"""
