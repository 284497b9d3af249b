"""The key function of this adapter: the deferred call a tool Step runs, read inside a tool."""

from __future__ import annotations

from dex_agents import DeferredToolExecution, require_deferred_tool_execution

__all__ = ["get_current_deferred_tool_execution"]


def get_current_deferred_tool_execution() -> DeferredToolExecution:
    """The whole deferred call that the current tool Step runs: its idempotency key, attempt,
    answers to the call's questions, heartbeat and checkpoint.

    Call it inside a ``FunctionTool``'s ``on_invoke_tool`` (or a ``function_tool`` body), which
    ``OpenAIAgentsRunner`` runs in the call's own tool Step; it is also set in the tool's child
    tasks and in ``asyncio.to_thread``. Pass ``idempotency_key`` to the system the tool writes to,
    so a retried Step never applies the write twice.

    Raises:
        NoDeferredToolExecutionError: Outside a tool Step, such as in a tool of the agent's own MCP
            servers, which the SDK runs inline in ``RunModel``.

    Example:
        >>> async def call_remote(context: ToolContext[Any], arguments: str) -> str:
        ...     key = get_current_deferred_tool_execution().idempotency_key
        ...     return await tools.call_tool("refund", json.loads(arguments), idempotency_key=key)
        >>> refund = FunctionTool(name="refund", description="Refund an order.",
        ...     params_json_schema=schema, on_invoke_tool=call_remote)
    """
    return require_deferred_tool_execution()
