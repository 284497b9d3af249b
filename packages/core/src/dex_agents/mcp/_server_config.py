"""How the Worker reaches one MCP server: a stdio command or a Streamable HTTP URL.

Configure servers on the Worker, never from Flow input, a user message, or a browser: a stdio
server's command runs with the Worker's privileges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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


def _check_common(
    owner: str,
    name: object,
    connection_timeout: object,
    request_timeout: object,
    connection_attempts: object,
    task_wait_timeout: object,
) -> None:
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(f"{owner}.name must be non-blank text, got {name!r}")
    for label, value in (
        ("connection_timeout", connection_timeout),
        ("request_timeout", request_timeout),
        ("task_wait_timeout", task_wait_timeout),
    ):
        if not isinstance(value, timedelta):
            raise ConfigurationTypeError(
                f"{owner} {name}: {label} must be a timedelta, got {value!r}"
            )
        if value <= timedelta(0):
            raise ConfigurationError(f"{owner} {name}: {label} must be positive, got {value}")
    if (
        isinstance(connection_attempts, bool)
        or not isinstance(connection_attempts, int)
        or connection_attempts < 1
    ):
        raise ConfigurationError(
            f"{owner} {name}: connection_attempts must be an int of at least 1, "
            f"got {connection_attempts!r}"
        )


@dataclass(frozen=True)
class McpStdioServerConfig:
    """An MCP server the Worker starts as a subprocess, one process per request.

    Attributes:
        name: The server's name: the prefix of its tool names (``<name>__<tool>``) and the
            ``server`` of the resource and prompt tools.
        command: The program to run, with the Worker's privileges.
        args: Its arguments.
        env: Environment variables for the process; ``None`` passes the SDK's safe default set.
        cwd: The working directory, or ``None`` for the Worker's.
        trusts_tool_annotations: Whether the tools' ``readOnlyHint``/``idempotentHint`` set
            their effect; ``False`` keeps the session default unless a policy names a tool.
        connection_timeout: Bound of starting the process and of each handshake request.
        request_timeout: Bound of one ``tools/call`` request.
        connection_attempts: Starts tried before a request counts as never sent.
        task_wait_timeout: How long one tool Step attempt polls the server's task; a stdio task
            lives in the process, so it is always polled inside the Step.

    Raises:
        ConfigurationError: For a blank name or command, or a non-positive bound.
        ConfigurationTypeError: For a value of the wrong type.

    Example:
        >>> McpStdioServerConfig(name="files", command="mcp-server-files", args=["/srv/reports"])
        ... # doctest: +ELLIPSIS
        McpStdioServerConfig(name='files', command='mcp-server-files', args=('/srv/reports',), ...)
    """

    name: str
    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    trusts_tool_annotations: bool = True
    connection_timeout: timedelta = DEFAULT_CONNECTION_TIMEOUT
    request_timeout: timedelta = DEFAULT_REQUEST_TIMEOUT
    connection_attempts: int = DEFAULT_CONNECTION_ATTEMPTS
    task_wait_timeout: timedelta = DEFAULT_TASK_WAIT_TIMEOUT

    def __post_init__(self) -> None:
        owner = "McpStdioServerConfig"
        _check_common(
            owner,
            self.name,
            self.connection_timeout,
            self.request_timeout,
            self.connection_attempts,
            self.task_wait_timeout,
        )
        if not isinstance(self.command, str) or not self.command.strip():
            raise ConfigurationError(
                f"{owner} {self.name}: command must be non-blank text, got {self.command!r}"
            )
        if isinstance(self.args, str) or not all(isinstance(arg, str) for arg in self.args):
            raise ConfigurationTypeError(
                f"{owner} {self.name}: args must be a sequence of str, got {self.args!r}"
            )
        object.__setattr__(self, "args", tuple(self.args))
        if self.env is not None:
            object.__setattr__(self, "env", MappingProxyType(dict(self.env)))


@dataclass(frozen=True)
class McpStreamableHttpServerConfig:
    """An MCP server reached over Streamable HTTP, one new HTTP connection per request.

    Attributes:
        name: The server's name (see ``McpStdioServerConfig.name``).
        url: The MCP endpoint, such as ``https://tickets.example.com/mcp``.
        headers: Sent with every request, such as an ``Authorization`` header read from the
            Worker's environment; never stored in Flow state.
        trusts_tool_annotations: Whether the tools' annotations set their effect.
        connection_timeout: Bound of connecting and of each handshake request.
        request_timeout: Bound of one ``tools/call`` request.
        connection_attempts: Connections tried before a request counts as never sent.
        task_wait_timeout: How long one tool Step attempt polls a task inside the Step, which
            happens only for a runner without ``poll_tool_task`` and for ``call_tool``.

    Raises:
        ConfigurationError: For a blank name, a URL that is not http(s), or a non-positive bound.

    Example:
        >>> McpStreamableHttpServerConfig(name="tickets", url="https://tickets.example.com/mcp")
        ... # doctest: +ELLIPSIS
        McpStreamableHttpServerConfig(name='tickets', url='https://tickets.example.com/mcp', ...)
    """

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    trusts_tool_annotations: bool = True
    connection_timeout: timedelta = DEFAULT_CONNECTION_TIMEOUT
    request_timeout: timedelta = DEFAULT_REQUEST_TIMEOUT
    connection_attempts: int = DEFAULT_CONNECTION_ATTEMPTS
    task_wait_timeout: timedelta = DEFAULT_TASK_WAIT_TIMEOUT

    def __post_init__(self) -> None:
        owner = "McpStreamableHttpServerConfig"
        _check_common(
            owner,
            self.name,
            self.connection_timeout,
            self.request_timeout,
            self.connection_attempts,
            self.task_wait_timeout,
        )
        if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"{owner} {self.name}: url must start with http:// or https://, got {self.url!r}"
            )
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))

    def __repr__(self) -> str:
        # Headers usually carry a credential, so a log line never shows their values.
        return (
            f"McpStreamableHttpServerConfig(name={self.name!r}, url={self.url!r}, "
            f"headers=<{len(self.headers)} hidden>, "
            f"trusts_tool_annotations={self.trusts_tool_annotations!r})"
        )


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
