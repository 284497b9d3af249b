"""The idempotency key of the tool call a Pydantic AI tool runs for, read inside the tool."""

from __future__ import annotations

from typing import Any

from dex_agents import RunnerContractError, require_deferred_tool_execution
from pydantic_ai.tools import RunContext

__all__ = ["deferred_tool_idempotency_key"]


def deferred_tool_idempotency_key(ctx: RunContext[Any]) -> str:
    """Return ``<flow_id>/<turn_id>/<tool_call_id>`` of the call the tool runs for.

    Call it inside a Pydantic AI tool (or a ``Tool.from_schema`` wrapper) with the tool's
    ``RunContext``. The key is the same on every attempt of the call's tool Step, so pass it to the
    system the tool writes to, which drops a repeated write.

    Raises:
        NoDeferredToolExecutionError: When no tool Step runs here, such as a tool called by an
            agent run outside a durable session.
        RunnerContractError: When ``ctx`` belongs to another tool call than the one the Step runs.

    Example:
        >>> @agent.tool
        ... async def refund(ctx: RunContext[Deps], order_id: str) -> str:
        ...     key = deferred_tool_idempotency_key(ctx)
        ...     return await ctx.deps.payments.refund(order_id, idempotency_key=key)
    """
    call = require_deferred_tool_execution()
    expected = call.tool_call.tool_call_id
    if ctx.tool_call_id is not None and ctx.tool_call_id != expected:
        raise RunnerContractError(
            f"the RunContext is of tool call {ctx.tool_call_id!r}, but this tool Step runs "
            f"{expected!r}; read the key with the RunContext the tool received"
        )
    return call.idempotency_key
