"""The errors dex-agents raises, under one base class, ``DexAgentsError``.

Every error keeps the built-in base a caller may already catch (``ValueError`` for a bad value,
``TypeError`` for a wrong type or a missing capability), so ``except ValueError`` still works, and
``except DexAgentsError`` catches anything dex-agents raised on purpose.

- ``ConfigurationError``: a definition, option or argument has a bad value. Raised where the value
  is given (building a Flow, options, an agent definition, a runner), so it never reaches a
  session.
- ``ConfigurationTypeError``: a value has the wrong type, or a runner lacks a capability that an
  option needs (``compaction`` without ``ContextCompactionRunner``, for example).
- ``RunnerContractError``: a runner broke the runner contract while a session ran, such as by
  returning a value of the wrong type from ``run_model_step``; the Step attempt fails with it.
- ``ToolExecutionError``: a tool failed in a way the model should see.

Example:
    >>> from dex_agents import AgentSessionOptions
    >>> try:
    ...     AgentSessionOptions(message_window_size=0)
    ... except ConfigurationError as error:
    ...     print(type(error).__name__, isinstance(error, ValueError))
    ConfigurationError True
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "ConfigurationTypeError",
    "DexAgentsError",
    "RunnerContractError",
    "ToolExecutionError",
]


class DexAgentsError(Exception):
    """Base class of every error that dex-agents raises on purpose."""


class ConfigurationError(DexAgentsError, ValueError):
    """A definition, option or argument has a value dex-agents cannot use.

    The message names the option and the value, and says what is allowed.
    """


class ConfigurationTypeError(DexAgentsError, TypeError):
    """A value has the wrong type, or a runner lacks a capability that an option needs."""


class RunnerContractError(DexAgentsError, TypeError):
    """A runner broke the runner contract while a session ran; the Step attempt fails with it."""


class ToolExecutionError(DexAgentsError):
    """Tool failure that the model should see, raised from ``execute_deferred_tool_call``.

    The session records the call as ``failed`` with this message and does not retry it. Raise any
    other exception for an unexpected failure: ``CallTool`` retries it and, once its attempts run
    out, records ``failed`` for a ``read`` tool and ``outcome_unknown`` for a write;
    ``CallSingleAttemptTool`` records ``outcome_unknown`` at once.

    Example:
        >>> def find_order(order_id: int) -> str:
        ...     raise ToolExecutionError(f"order {order_id} does not exist")
    """
