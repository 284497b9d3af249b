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
- ``SessionFlowTypeError``: an ``AgentSessionClient`` was asked about a session of another Flow
  type; it is also a ``FlowNotActiveOrNotFoundError``, so such a session reads as not found.
- ``StoredStateError``: a stored framework message or run state is not one this runner wrote (a
  session written by another runner or an incompatible version); the Step attempt fails with it.
- ``AgentFrameworkError``: the agent framework did something its runner cannot turn into a
  session outcome (a run without a final answer, a model call that failed without raising); the
  Step attempt fails with it and retries.
- ``ToolTaskPollerMissingError``: a call's task has no poller on this Worker; the session records
  the call at once by its effect (``failed`` for a read, ``outcome_unknown`` for a write), the
  same as for a runner that polls no tasks at all.

Example:
    >>> from dex_agents import AgentSessionOptions
    >>> try:
    ...     AgentSessionOptions(message_window_size=0)
    ... except ConfigurationError as error:
    ...     print(type(error).__name__, isinstance(error, ValueError))
    ConfigurationError True
"""

from __future__ import annotations

import grpc
from dex import ErrorSubStatus, FlowNotActiveOrNotFoundError

__all__ = [
    "AgentFrameworkError",
    "ConfigurationError",
    "ConfigurationTypeError",
    "DexAgentsError",
    "RunnerContractError",
    "SessionFlowTypeError",
    "StoredStateError",
    "ToolExecutionError",
    "ToolTaskPollerMissingError",
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


class SessionFlowTypeError(DexAgentsError, FlowNotActiveOrNotFoundError):
    """An ``AgentSessionClient`` was called for a session of another Flow type.

    A client serves only the sessions of its own ``AgentSessionFlow``, so an application that
    authorizes by Flow type cannot be led to read or approve another type's session through it.
    It subclasses the SDK's ``FlowNotActiveOrNotFoundError``: code that answers "not found" for a
    missing session answers the same for a foreign one.

    Attributes:
        expected_flow_type: The client's Flow type.
        actual_flow_type: The session's Flow type.

    Example:
        >>> error = SessionFlowTypeError("s-1", "support_agent", "billing_agent")
        >>> isinstance(error, FlowNotActiveOrNotFoundError), error.flow_id
        (True, 's-1')
    """

    def __init__(self, session_id: str, expected_flow_type: str, actual_flow_type: str) -> None:
        super().__init__(
            grpc.StatusCode.NOT_FOUND,
            ErrorSubStatus.FLOW_NOT_EXISTS,
            f"session {session_id!r} is a {actual_flow_type!r} session, not one of this "
            f"client's Flow type {expected_flow_type!r}",
            "agent_session_client",
            session_id,
        )
        self.expected_flow_type = expected_flow_type
        self.actual_flow_type = actual_flow_type


class ToolTaskPollerMissingError(DexAgentsError, LookupError):
    """A tool call waits for a task that no poller on this Worker can poll.

    Raised from ``poll_tool_task`` (``dex_agents.adapters.AdapterRunner`` raises it for every
    runner). The session does not retry it: it records the call at once by its effect, ``failed``
    for a ``read`` tool and ``outcome_unknown`` for a write (the task may have had its effect),
    with this message as the error.

    Example:
        >>> raise ToolTaskPollerMissingError("no task poller on this Worker polls tool report")
        Traceback (most recent call last):
        ...
        dex_agents.exceptions.ToolTaskPollerMissingError: no task poller on this Worker polls tool report
    """


class StoredStateError(DexAgentsError, ValueError):
    """A stored framework message or run state is not one this runner wrote.

    Raised by a runner while it reads the session's stored items or ``framework_run_state``; the
    Step attempt fails with it. Nothing is lost: the stored values stay as they are.

    Example:
        >>> raise StoredStateError("framework run state '{}' is not a LangGraph run state")
        Traceback (most recent call last):
        ...
        dex_agents.exceptions.StoredStateError: framework run state '{}' is not a LangGraph run state
    """


class AgentFrameworkError(DexAgentsError, RuntimeError):
    """The agent framework did something its runner cannot turn into a session outcome.

    Such as a run that ended without a final answer, or a model call that failed without
    raising. The Step attempt fails with it and is retried like any unexpected failure.

    Example:
        >>> raise AgentFrameworkError("the ADK model call failed with 500: no message")
        Traceback (most recent call last):
        ...
        dex_agents.exceptions.AgentFrameworkError: the ADK model call failed with 500: no message
    """
