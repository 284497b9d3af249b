"""Options of one agent session Flow type: tool policies, limits, and deadlines."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType

from dex_agents._built_in_tools import (
    DEFAULT_MAX_DURABLE_WAIT,
    BuiltInTool,
    max_durable_wait_seconds,
    parse_built_in_tools,
)
from dex_agents._compaction import CompactionPolicy
from dex_agents._enum_values import enum_member
from dex_agents._session.message_layout import (
    DEFAULT_MESSAGE_CHUNK_MAX_BYTES,
    DEFAULT_MESSAGE_CHUNK_SIZE,
    DEFAULT_MESSAGE_WINDOW_SIZE,
    DEFAULT_RETAINED_MESSAGE_LIMIT,
    MessageStorageLimits,
)
from dex_agents._spend_limit import ModelSpendLimit
from dex_agents._tool_outcome_check import ToolOutcomeCheck
from dex_agents._tool_policy import ToolEffect, ToolPolicy
from dex_agents._tracing_options import AgentTracingOptions
from dex_agents.exceptions import ConfigurationError, ConfigurationTypeError

__all__ = [
    "DEFAULT_EVENT_STREAM_CAPACITY_BYTES",
    "AgentSessionOptions",
    "RunModelLimit",
    "ToolCallLimit",
    "check_stream_and_interrupt_limits",
]

DEFAULT_EVENT_STREAM_CAPACITY_BYTES = 10 * 1024 * 1024
"""The AgentEvents Stream capacity when AgentSessionOptions does not set one (10 MiB)."""


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
        ConfigurationError: When a duration is not positive or ``maximum_attempts`` is below 1.

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
            raise ConfigurationError(
                f"maximum_attempts must be at least 1, got {self.maximum_attempts}"
            )


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
        ConfigurationError: When a duration is not positive.

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
        message_window_size: Messages the window holds before its oldest move into chunks (64).
        message_chunk_size: Messages per ``AgentMessageChunks`` instance at most (32).
        message_chunk_max_bytes: Encoded JSON bytes per chunk at most (1 MiB, at most 8 MiB).
        retained_message_limit: With compaction, messages always kept after a deleted chunk
            (1,000); ``None`` keeps every message.
        compaction: The compaction policy; the runner must implement
            ``ContextCompactionRunner`` (else TypeError). ``None`` never compacts or deletes.
        built_in_tools: Built-in tools the session offers (``ask_user``, ``durable_wait``,
            ``write_todos``); an enabled name is reserved, so no tool policy may name it.
        max_durable_wait: Longest ``durable_wait`` (365 days); whole seconds from 1.
        plan_mode_enabled: Whether ``plan_mode`` messages start planning turns; needs
            ``write_todos`` and a runner with ``supports_plan_mode``.
        model_spend_limit: The application's ``ModelSpendLimit``, asked before each model call;
            a refusal ends the turn with ``last_turn_error``. ``None`` makes no checks.
        tracing: ``AgentTracingOptions``: OpenTelemetry GenAI spans of the session's Steps.

    Raises:
        ConfigurationError: When the capacity is not positive, the deadline is not positive, a built-in
            tool is unknown or named by a tool policy, ``max_durable_wait`` is under a second, or
            plan mode lacks ``write_todos``.

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
    built_in_tools: frozenset[BuiltInTool] = frozenset()
    max_durable_wait: timedelta = DEFAULT_MAX_DURABLE_WAIT
    plan_mode_enabled: bool = False
    # Message storage, retention, and compaction (see agent_message_store).
    message_window_size: int = DEFAULT_MESSAGE_WINDOW_SIZE
    message_chunk_size: int = DEFAULT_MESSAGE_CHUNK_SIZE
    message_chunk_max_bytes: int = DEFAULT_MESSAGE_CHUNK_MAX_BYTES
    retained_message_limit: int | None = DEFAULT_RETAINED_MESSAGE_LIMIT
    compaction: CompactionPolicy | None = None
    # Spend limits (see model_spend_limit): asked before each model call, told what it used.
    model_spend_limit: ModelSpendLimit | None = None
    # OpenTelemetry spans (see dex_agents._tracing): on by default, with the global provider.
    tracing: AgentTracingOptions = field(default_factory=AgentTracingOptions)

    def __post_init__(self) -> None:
        if not isinstance(self.tracing, AgentTracingOptions):
            raise ConfigurationTypeError(
                f"tracing must be an AgentTracingOptions, got {self.tracing!r}"
            )
        if self.model_spend_limit is not None and not isinstance(
            self.model_spend_limit, ModelSpendLimit
        ):
            raise ConfigurationTypeError(
                f"model_spend_limit must be a ModelSpendLimit or None, got {self.model_spend_limit!r}"
            )
        # Raises ValueError naming the bad storage limit.
        MessageStorageLimits(
            self.message_window_size,
            self.message_chunk_size,
            self.message_chunk_max_bytes,
            self.retained_message_limit,
        )
        if self.compaction is not None and not isinstance(self.compaction, CompactionPolicy):
            raise ConfigurationTypeError(
                f"compaction must be a CompactionPolicy or None, got {self.compaction!r}"
            )
        object.__setattr__(
            self,
            "default_tool_effect",
            enum_member(ToolEffect, self.default_tool_effect, "default_tool_effect"),
        )
        # A read-only copy, so a caller's later change to its dict never reaches a running Worker.
        object.__setattr__(self, "tool_policies", MappingProxyType(dict(self.tool_policies)))
        for name, policy in self.tool_policies.items():
            if not isinstance(policy, ToolPolicy):
                raise ConfigurationTypeError(
                    f"tool_policies[{name!r}] must be a ToolPolicy, got {policy!r}"
                )
        check_stream_and_interrupt_limits(self.event_stream_capacity_bytes, self.interrupt_deadline)
        self._check_built_in_tools()

    def _check_built_in_tools(self) -> None:
        object.__setattr__(self, "built_in_tools", parse_built_in_tools(self.built_in_tools))
        max_durable_wait_seconds(self.max_durable_wait)
        reserved = sorted(name for name in self.tool_policies if name in self.built_in_tools)
        if reserved:
            raise ConfigurationError(
                f"tool_policies names the enabled built-in tool {reserved[0]!r}; "
                "an enabled built-in name is reserved"
            )
        if self.plan_mode_enabled and BuiltInTool.WRITE_TODOS not in self.built_in_tools:
            raise ConfigurationError(
                "plan_mode_enabled needs BuiltInTool.WRITE_TODOS in built_in_tools, "
                "because a planning turn writes its plan with write_todos"
            )

    def outcome_check(self, tool_name: str) -> ToolOutcomeCheck | None:
        """The outcome check ``tool_policies`` declares for ``tool_name``, or ``None``.

        Example:
            >>> AgentSessionOptions().outcome_check("refund") is None
            True
        """
        policy = self.tool_policies.get(tool_name)
        return policy.outcome_check if policy is not None else None

    @property
    def message_storage_limits(self) -> MessageStorageLimits:
        """The storage limits the message store applies; retention only with compaction.

        Without a compaction policy nothing is deleted, so ``retained_message_limit`` reads as
        ``None`` here.

        Raises:
            ConfigurationError: When a limit is invalid.
        """
        return MessageStorageLimits(
            message_window_size=self.message_window_size,
            message_chunk_size=self.message_chunk_size,
            message_chunk_max_bytes=self.message_chunk_max_bytes,
            retained_message_limit=(
                self.retained_message_limit if self.compaction is not None else None
            ),
        )


def _require_limit(*durations: timedelta) -> None:
    for duration in durations:
        if duration <= timedelta(0):
            raise ConfigurationError(f"a Step limit duration must be positive, got {duration}")


def check_stream_and_interrupt_limits(
    event_stream_capacity_bytes: int, interrupt_deadline: timedelta | None
) -> None:
    """Checks the two limits that session options and a Stepwise agent definition both take.

    Raises:
        ConfigurationError: When ``event_stream_capacity_bytes`` is not positive, or
            ``interrupt_deadline`` is not positive or ``None``.
    """
    if event_stream_capacity_bytes <= 0:
        raise ConfigurationError(
            f"event_stream_capacity_bytes must be positive, got {event_stream_capacity_bytes}"
        )
    if interrupt_deadline is not None and interrupt_deadline <= timedelta(0):
        raise ConfigurationError(
            f"interrupt_deadline must be positive or None, got {interrupt_deadline}"
        )
