"""The tool call that the current tool Step runs, readable from inside the tool.

A framework calls a tool through its own machinery, several frames away from the runner's
``execute_deferred_tool_call``, so the tool cannot take the ``DeferredToolExecution`` as an
argument. The tool Steps (``CallTool`` and ``CallSingleAttemptTool``) therefore set it in a
context variable for exactly the duration of the runner call, and any code that runs inside it,
in the same task, in tasks it starts, or in ``asyncio.to_thread``, reads it with
:func:`current_deferred_tool_execution`. Every adapter reads its idempotency key from here.

``loop.run_in_executor`` does not copy context variables into its thread; an adapter whose
framework runs sync tools that way passes the call on itself (``contextvars.copy_context()``).

Example:
    >>> async def refund(order_id: str) -> str:  # a framework tool
    ...     call = require_deferred_tool_execution()
    ...     return await payments.refund(order_id, idempotency_key=call.idempotency_key)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

from dex_agents._runner_contract import DeferredToolExecution
from dex_agents.exceptions import DexAgentsError

__all__ = [
    "NoDeferredToolExecutionError",
    "current_deferred_tool_execution",
    "require_deferred_tool_execution",
]

_CURRENT: Final[ContextVar[DeferredToolExecution | None]] = ContextVar(
    "dex_agents_deferred_tool_execution", default=None
)


class NoDeferredToolExecutionError(DexAgentsError, LookupError):
    """:func:`require_deferred_tool_execution` was called outside a tool Step's runner call."""


def current_deferred_tool_execution() -> DeferredToolExecution | None:
    """The call the current tool Step runs, or ``None`` outside one.

    Example:
        >>> current_deferred_tool_execution() is None  # not inside a tool Step
        True
    """
    return _CURRENT.get()


def require_deferred_tool_execution() -> DeferredToolExecution:
    """The call the current tool Step runs.

    Raises:
        NoDeferredToolExecutionError: When no tool Step's runner call is running here, such as
            when a framework ran the tool inline in ``RunModel`` instead of deferring it.

    Example:
        >>> async def refund(order_id: str) -> str:  # a framework tool, run by a tool Step
        ...     key = require_deferred_tool_execution().idempotency_key
        ...     return await payments.refund(order_id, idempotency_key=key)
        >>> try:  # outside a tool Step there is no deferred call
        ...     require_deferred_tool_execution()
        ... except NoDeferredToolExecutionError as error:
        ...     print(str(error).split(":")[0])
        no deferred tool call is running here
    """
    call = _CURRENT.get()
    if call is None:
        raise NoDeferredToolExecutionError(
            "no deferred tool call is running here: read the tool call only from code that a "
            "tool Step runs (inside the runner's execute_deferred_tool_call); a tool that the "
            "framework ran inside RunModel has no deferred call"
        )
    return call


@contextmanager
def _deferred_tool_execution_scope(call: DeferredToolExecution) -> Iterator[None]:
    """Make ``call`` the current deferred tool call while the block runs (the tool Steps)."""
    token = _CURRENT.set(call)
    try:
        yield
    finally:
        _CURRENT.reset(token)
