"""Options of one agent session Flow type: tool policies, limits, and deadlines."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType

from dex_agents.tool_policy import ToolEffect, ToolPolicy

__all__ = [
    "DEFAULT_EVENT_STREAM_CAPACITY_BYTES",
    "AgentSessionOptions",
    "RunModelLimit",
    "ToolCallLimit",
]

#: The AgentEvents Stream capacity when AgentSessionOptions does not set one (10 MiB).
DEFAULT_EVENT_STREAM_CAPACITY_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True)
class RunModelLimit:
    """Timeout and retry budget of each model call Step (``RunModel``).

    Attributes:
        attempt_timeout: How long one attempt may run (15 minutes).
        heartbeat_timeout: How long an attempt may go without a heartbeat (2 minutes); the session
            heartbeats every 20 seconds while the runner works.
        maximum_attempts: Attempts, the first included, before the turn fails (3).
        retry_budget: Time from the first attempt after which no attempt starts (30 minutes).

    Raises:
        ValueError: When a duration is not positive or ``maximum_attempts`` is below 1.

    Example:
        >>> RunModelLimit(attempt_timeout=timedelta(minutes=40), retry_budget=timedelta(hours=2))
        RunModelLimit(attempt_timeout=datetime.timedelta(seconds=2400), ...)
    """

    attempt_timeout: timedelta = timedelta(minutes=15)
    heartbeat_timeout: timedelta = timedelta(minutes=2)
    maximum_attempts: int = 3
    retry_budget: timedelta = timedelta(minutes=30)

    def __post_init__(self) -> None:
        _require_limit(self.attempt_timeout, self.heartbeat_timeout, self.retry_budget)
        if self.maximum_attempts < 1:
            raise ValueError(f"maximum_attempts must be at least 1, got {self.maximum_attempts}")


@dataclass(frozen=True)
class ToolCallLimit:
    """Timeouts and retry budget of the tool Steps (``CallTool`` and ``CallSingleAttemptTool``).

    The attempts come from the call's effect (3 for ``CallTool``, 1 for
    ``CallSingleAttemptTool``); see ``tool_effect_rules``.

    Attributes:
        attempt_timeout: How long one attempt may run (30 minutes, above the MCP request timeout).
        heartbeat_timeout: How long an attempt may go without a heartbeat (2 minutes).
        retry_budget: Time from the first attempt after which no attempt starts (1 hour).

    Raises:
        ValueError: When a duration is not positive.

    Example:
        >>> ToolCallLimit(attempt_timeout=timedelta(minutes=5)).retry_budget
        datetime.timedelta(seconds=3600)
    """

    attempt_timeout: timedelta = timedelta(minutes=30)
    heartbeat_timeout: timedelta = timedelta(minutes=2)
    retry_budget: timedelta = timedelta(hours=1)

    def __post_init__(self) -> None:
        _require_limit(self.attempt_timeout, self.heartbeat_timeout, self.retry_budget)


@dataclass(frozen=True)
class AgentSessionOptions:
    """Options of one ``AgentSessionFlow``: how tools are classified and how long Steps may run.

    Attributes:
        tool_policies: Explicit policy per tool name; it wins over framework metadata and
            ``default_tool_effect``.
        default_tool_effect: Effect of a tool without a policy or framework metadata
            (``unclassified``, which runs once and needs approval).
        event_stream_capacity_bytes: Capacity of the AgentEvents Stream (10 MiB).
        interrupt_deadline: How long an approval waits before it records ``rejected``; ``None``
            waits forever.
        run_model_limit: Timeout and retries of every ``RunModel``.
        tool_call_limit: Timeout and retries of the tool Steps.

    Raises:
        ValueError: When the capacity is not positive or the deadline is not positive.

    Example:
        >>> options = AgentSessionOptions(
        ...     tool_policies={"search_tickets": ToolPolicy(ToolEffect.READ)},
        ...     interrupt_deadline=timedelta(hours=24),
        ... )
    """

    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=dict)
    default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED
    event_stream_capacity_bytes: int = DEFAULT_EVENT_STREAM_CAPACITY_BYTES
    interrupt_deadline: timedelta | None = None
    run_model_limit: RunModelLimit = field(default_factory=RunModelLimit)
    tool_call_limit: ToolCallLimit = field(default_factory=ToolCallLimit)

    def __post_init__(self) -> None:
        # A read-only copy, so a caller's later change to its dict never reaches a running Worker.
        object.__setattr__(self, "tool_policies", MappingProxyType(dict(self.tool_policies)))
        for name, policy in self.tool_policies.items():
            if not isinstance(policy, ToolPolicy):
                raise TypeError(f"tool_policies[{name!r}] must be a ToolPolicy, got {policy!r}")
        if self.event_stream_capacity_bytes <= 0:
            raise ValueError(
                "event_stream_capacity_bytes must be positive, "
                f"got {self.event_stream_capacity_bytes}"
            )
        if self.interrupt_deadline is not None and self.interrupt_deadline <= timedelta(0):
            raise ValueError(
                f"interrupt_deadline must be positive or None, got {self.interrupt_deadline}"
            )


def _require_limit(*durations: timedelta) -> None:
    for duration in durations:
        if duration <= timedelta(0):
            raise ValueError(f"a Step limit duration must be positive, got {duration}")
