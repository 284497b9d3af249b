"""The errors of dex_agents.mcp, under ``dex_agents.DexAgentsError``."""

from __future__ import annotations

from dex_agents import DexAgentsError

__all__ = ["McpServerUnreachableError", "McpTaskError", "McpToolCallInterruptedError"]


class McpToolCallInterruptedError(DexAgentsError, ConnectionError):
    """A ``tools/call`` that was sent may have run, but no result came back.

    The stream broke, the server exited, the request timed out after it was sent, the server
    answered with an internal error (-32603), an HTTP error status or a body that is not
    JSON-RPC (-32700), or it kept asking to repeat the call. It is a Step failure, so the effect
    class decides: ``read`` and ``idempotent_write`` calls are sent again by ``CallTool`` with the
    same idempotency key, up to 3 attempts; other effects record ``outcome_unknown`` and are never
    sent again.

    Example:
        >>> raise McpToolCallInterruptedError("files__write: the server exited")
        Traceback (most recent call last):
        ...
        dex_agents.mcp._errors.McpToolCallInterruptedError: files__write: the server exited
    """


class McpServerUnreachableError(DexAgentsError, ConnectionError):
    """Every connection attempt to an MCP server failed, so no request reached it."""


class McpTaskError(DexAgentsError, RuntimeError):
    """An MCP task can no longer be followed: the server lost it, or it could not take an answer.

    A Step failure: after its attempts the call records ``failed`` for a ``read`` tool and
    ``outcome_unknown`` otherwise, because the task may have taken effect.
    """
