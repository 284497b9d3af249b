"""MCP servers' tools as agent tools: ``McpToolSource`` and its server configs.

Install the MCP SDK with the extra, ``pip install "dex-agents[mcp]"``; the core itself never
imports it. Every MCP tool call runs in its own tool Step, with an effect class from the tool's
annotations, so a crash never repeats a write silently. Configure the servers on the Worker,
never from Flow input, a user message, or a browser: a stdio server's command runs with the
Worker's privileges.

Example:
    >>> from dex_agents.mcp import McpStdioServerConfig, McpStreamableHttpServerConfig, McpToolSource
    >>> tools = McpToolSource([
    ...     McpStdioServerConfig(name="files", command="mcp-server-files", args=["/srv/reports"]),
    ...     McpStreamableHttpServerConfig(
    ...         name="tickets",
    ...         url="https://tickets.example.com/mcp",
    ...         headers={"Authorization": "Bearer <token from the Worker's environment>"},
    ...     ),
    ... ])
"""

try:
    import mcp as _mcp_sdk  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        'dex_agents.mcp needs the MCP SDK: install it with pip install "dex-agents[mcp]"'
    ) from error

from dex_agents.mcp._adapter_checks import require_listed_tool, require_mcp_tool_source
from dex_agents.mcp._connection import TASKS_EXTENSION
from dex_agents.mcp._errors import McpTaskError, McpToolCallInterruptedError
from dex_agents.mcp._input_requests import INPUT_REQUEST_ERROR_PREFIX
from dex_agents.mcp._resource_tools import (
    MCP_GET_PROMPT_TOOL_NAME,
    MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
    MCP_READ_RESOURCE_TOOL_NAME,
)
from dex_agents.mcp._server_config import (
    DEFAULT_CONNECTION_ATTEMPTS,
    DEFAULT_CONNECTION_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_TASK_WAIT_TIMEOUT,
    McpServerConfig,
    McpStdioServerConfig,
    McpStreamableHttpServerConfig,
)
from dex_agents.mcp._tasks import ANSWER_SETTLE_SECONDS, MCP_TASK_STATUS_EVENT
from dex_agents.mcp._tool_call import IDEMPOTENCY_KEY_META_KEY, MCP_TOOL_PROGRESS_EVENT
from dex_agents.mcp._tool_names import MAX_TOOL_NAME_LENGTH, agent_tool_name
from dex_agents.mcp._tool_source import (
    DEFAULT_LISTING_FAILURE_BACKOFF,
    DEFAULT_LISTING_TTL,
    DEFAULT_SOURCE_NAME,
    McpTool,
    McpToolSource,
)

__all__ = [
    "ANSWER_SETTLE_SECONDS",
    "DEFAULT_CONNECTION_ATTEMPTS",
    "DEFAULT_CONNECTION_TIMEOUT",
    "DEFAULT_LISTING_FAILURE_BACKOFF",
    "DEFAULT_LISTING_TTL",
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_SOURCE_NAME",
    "DEFAULT_TASK_WAIT_TIMEOUT",
    "IDEMPOTENCY_KEY_META_KEY",
    "INPUT_REQUEST_ERROR_PREFIX",
    "MAX_TOOL_NAME_LENGTH",
    "MCP_GET_PROMPT_TOOL_NAME",
    "MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME",
    "MCP_READ_RESOURCE_TOOL_NAME",
    "MCP_TASK_STATUS_EVENT",
    "MCP_TOOL_PROGRESS_EVENT",
    "TASKS_EXTENSION",
    "McpServerConfig",
    "McpStdioServerConfig",
    "McpStreamableHttpServerConfig",
    "McpTaskError",
    "McpTool",
    "McpToolCallInterruptedError",
    "McpToolSource",
    "agent_tool_name",
    "require_listed_tool",
    "require_mcp_tool_source",
]
