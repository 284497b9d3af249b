"""The idempotency key of the tool call an ADK tool is running, read from its ``ToolContext``."""

from __future__ import annotations

from dex_agents import RunnerContractError, require_deferred_tool_execution
from google.adk.tools.tool_context import ToolContext

__all__ = ["idempotency_key_for_tool_call"]


def idempotency_key_for_tool_call(tool_context: ToolContext) -> str:
    """Return the stable key of the call this tool runs, ``<flow_id>/<turn_id>/<tool_call_id>``.

    It is the same on every attempt of the call's tool Step, so pass it to the system the tool
    writes to and a retried write takes effect once. Call it inside the tool (a ``FunctionTool``
    function that takes ``tool_context``, or a ``BaseTool.run_async``).

    Raises:
        NoDeferredToolExecutionError: When no tool Step runs here (the tool ran outside
            ``GoogleAdkRunner.execute_deferred_tool_call``).
        RunnerContractError: When ``tool_context`` belongs to another call than the one the tool
            Step runs.

    Example:
        >>> async def refund_order(order_id: str, tool_context: ToolContext) -> str:
        ...     key = idempotency_key_for_tool_call(tool_context)
        ...     return await payments.refund(order_id, idempotency_key=key)
    """
    execution = require_deferred_tool_execution()
    call_id = execution.tool_call.tool_call_id
    if tool_context.function_call_id != call_id:
        raise RunnerContractError(
            f"the ToolContext is for function call {tool_context.function_call_id!r}, but the "
            f"tool Step runs call {call_id!r}"
        )
    return execution.idempotency_key
