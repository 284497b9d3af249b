"""How the Worker reaches one MCP server: a stdio command or a Streamable HTTP URL.

Configure servers on the Worker, never from Flow input, a user message, or a browser: a stdio
server's command runs with the Worker's privileges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Final, TypeAlias

from dex_agents import ConfigurationError, ConfigurationTypeError

__all__ = [
    "DEFAULT_CONNECTION_ATTEMPTS",
    "DEFAULT_CONNECTION_TIMEOUT",
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_TASK_WAIT_TIMEOUT",
    "McpServerConfig",
    "McpStdioServerConfig",
    "McpStreamableHttpServerConfig",
    "check_server_configs",
]

DEFAULT_CONNECTION_TIMEOUT: Final = timedelta(seconds=30)
"""Bound of connecting and of each handshake request."""
DEFAULT_REQUEST_TIMEOUT: Final = timedelta(minutes=10)
"""Bound of one ``tools/call`` request."""
DEFAULT_CONNECTION_ATTEMPTS: Final = 3
"""Connection attempts before a request counts as never sent."""
DEFAULT_TASK_WAIT_TIMEOUT: Final = timedelta(minutes=10)
"""How long one tool Step attempt polls a task inside the Step (stdio, or a runner without a
task poller)."""


@dataclass(frozen=True)
class _McpServerOptions:
    """What every server config has: its name, and how requests to it are bounded.

    Attributes:
        name: The server's name: the prefix of its tool names (``<name>__<tool>``) and the
            ``server`` of the resource and prompt tools.
        trusts_tool_annotations: Whether the tools' ``readOnlyHint``/``idempotentHint`` set
            their effect; ``False`` keeps the session default unless a policy names a tool.
        connection_timeout: Bound of connecting (or starting the process) and of each handshake
            request.
        request_timeout: Bound of one ``tools/call`` request.
        connection_attempts: Connections tried before a request counts as never sent.
        task_wait_timeout: How long one tool Step attempt polls a task inside the Step: always
            for a stdio server (its task lives in the process), and for a Streamable HTTP server
            only with a runner without ``poll_tool_task``, or through ``call_tool``.
    """

    name: str
    _: KW_ONLY
    trusts_tool_annotations: bool = True
    connection_timeout: timedelta = DEFAULT_CONNECTION_TIMEOUT
    request_timeout: timedelta = DEFAULT_REQUEST_TIMEOUT
    connection_attempts: int = DEFAULT_CONNECTION_ATTEMPTS
    task_wait_timeout: timedelta = DEFAULT_TASK_WAIT_TIMEOUT

    def __post_init__(self) -> None:
        owner = type(self).__name__
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigurationError(f"{owner}.name must be non-blank text, got {self.name!r}")
        for label in ("connection_timeout", "request_timeout", "task_wait_timeout"):
            value = getattr(self, label)
            if not isinstance(value, timedelta):
                raise ConfigurationTypeError(
                    f"{owner} {self.name}: {label} must be a timedelta, got {value!r}"
                )
            if value <= timedelta(0):
                raise ConfigurationError(
                    f"{owner} {self.name}: {label} must be positive, got {value}"
                )
        attempts = self.connection_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ConfigurationError(
                f"{owner} {self.name}: connection_attempts must be an int of at least 1, "
                f"got {attempts!r}"
            )


@dataclass(frozen=True)
class McpStdioServerConfig(_McpServerOptions):
    """An MCP server the Worker starts as a subprocess, one process per Worker, reused by every
    request (started again when it exits).

    Attributes:
        command: The program to run, with the Worker's privileges.
        args: Its arguments.
        env: Environment variables for the process (hidden from ``repr``); ``None`` passes the
            SDK's safe default set.
        cwd: The working directory, or ``None`` for the Worker's.

    The keyword-only options are those of every server (name, annotations, bounds).

    Raises:
        ConfigurationError: For a blank name or command, or a non-positive bound.
        ConfigurationTypeError: For a value of the wrong type.

    Example:
        >>> McpStdioServerConfig(name="files", command="mcp-server-files", args=["/srv/reports"])
        ... # doctest: +ELLIPSIS
        McpStdioServerConfig(name='files', ..., command='mcp-server-files', args=('/srv/reports',), ...)
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.command, str) or not self.command.strip():
            raise ConfigurationError(
                f"McpStdioServerConfig {self.name}: command must be non-blank text, "
                f"got {self.command!r}"
            )
        if isinstance(self.args, str) or not all(isinstance(arg, str) for arg in self.args):
            raise ConfigurationTypeError(
                f"McpStdioServerConfig {self.name}: args must be a sequence of str, got {self.args!r}"
            )
        object.__setattr__(self, "args", tuple(self.args))
        if self.env is not None:
            object.__setattr__(self, "env", MappingProxyType(dict(self.env)))


@dataclass(frozen=True)
class McpStreamableHttpServerConfig(_McpServerOptions):
    """An MCP server reached over Streamable HTTP, one MCP session per Worker, reused by every
    request (opened again when it fails).

    Attributes:
        url: The MCP endpoint, such as ``https://tickets.example.com/mcp``.
        headers: Sent with every request, such as an ``Authorization`` header read from the
            Worker's environment; never stored in Flow state, and hidden from ``repr``.

    The keyword-only options are those of every server (name, annotations, bounds).

    Raises:
        ConfigurationError: For a blank name, a URL that is not http(s), or a non-positive bound.

    Example:
        >>> McpStreamableHttpServerConfig(name="tickets", url="https://tickets.example.com/mcp")
        McpStreamableHttpServerConfig(name='tickets', ..., url='https://tickets.example.com/mcp')
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"McpStreamableHttpServerConfig {self.name}: url must start with http:// or "
                f"https://, got {self.url!r}"
            )
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))


McpServerConfig: TypeAlias = McpStdioServerConfig | McpStreamableHttpServerConfig
"""One configured MCP server."""


def check_server_configs(servers: Sequence[object]) -> tuple[McpServerConfig, ...]:
    """Checks the servers of one source: known types and unique names.

    Raises:
        ConfigurationTypeError: For an entry that is not a server config.
        ConfigurationError: When two servers share a name.
    """
    if isinstance(servers, (str, bytes)) or not isinstance(servers, Sequence):
        raise ConfigurationTypeError(
            f"McpToolSource needs a sequence of server configs, got {type(servers).__name__}"
        )
    checked: list[McpServerConfig] = []
    names: set[str] = set()
    for index, server in enumerate(servers):
        if not isinstance(server, (McpStdioServerConfig, McpStreamableHttpServerConfig)):
            raise ConfigurationTypeError(
                f"servers[{index}] must be an McpStdioServerConfig or "
                f"McpStreamableHttpServerConfig, got {type(server).__name__}"
            )
        if server.name in names:
            raise ConfigurationError(f"two MCP servers are named {server.name}")
        names.add(server.name)
        checked.append(server)
    return tuple(checked)
