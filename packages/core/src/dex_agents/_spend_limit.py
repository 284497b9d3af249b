"""Spend limits: an application's own limit on model calls, such as per account or API key.

A :class:`ModelSpendLimit` is asked before each model call of a session and told what each call
used. Counters and limits belong to the application, usually across many sessions; the session
only asks and reports. Without one, the session makes no checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, Protocol, runtime_checkable

from dex_agents._values import AgentUsage
from dex_agents.exceptions import ConfigurationError, ConfigurationTypeError

__all__ = [
    "MODEL_SPEND_LIMIT_ERROR_PREFIX",
    "ModelCallIdentity",
    "ModelCallKind",
    "ModelSpendLimit",
    "ModelSpendRefusal",
    "ModelSpendReport",
    "check_model_spend",
    "model_spend_limit_error",
]

MODEL_SPEND_LIMIT_ERROR_PREFIX: Final = "the model spend limit refused the model call"
"""Start of the ``last_turn_error`` of a turn that a :class:`ModelSpendRefusal` ended."""


class ModelCallKind(StrEnum):
    """Which Step makes the model call."""

    TURN = "turn"
    """``RunModel``: the runner's ``run_model_step``."""
    CONTEXT_SUMMARY = "context_summary"
    """``CompactContext``: the runner's ``summarize_context``."""


@dataclass(frozen=True)
class ModelCallIdentity:
    """Which session, turn, and Step attempt is about to make, or made, one model call.

    Attributes:
        flow_type: The agent's Flow type, such as ``"SupportAgent"``.
        flow_id: The session ID.
        turn_id: The turn, ``turn-<n>``.
        step_execution_id: The Step execution, shared by its attempts.
        attempt: One-based attempt of that Step execution.
        kind: ``turn`` for ``RunModel``, ``context_summary`` for ``CompactContext``.
        session_settings: The settings the turn runs with, such as the chosen model.

    Example:
        >>> call = ModelCallIdentity("SupportAgent", "session-42", "turn-3", "RunModel-7", 2)
        >>> call.usage_key
        'session-42/turn-3/RunModel-7/2'
    """

    flow_type: str
    flow_id: str
    turn_id: str
    step_execution_id: str
    attempt: int
    kind: ModelCallKind = ModelCallKind.TURN
    session_settings: Mapping[str, object] = field(default_factory=dict)

    @property
    def usage_key(self) -> str:
        """A key unique to this attempt's call, ``<flow_id>/<turn_id>/<step_execution_id>/<attempt>``.

        A crash can report one call twice; count a report once per key.
        """
        return f"{self.flow_id}/{self.turn_id}/{self.step_execution_id}/{self.attempt}"


@dataclass(frozen=True)
class ModelSpendRefusal:
    """A spend limit's refusal of a model call; ``reason`` becomes part of ``last_turn_error``.

    Keep secrets and account details a browser must not see out of ``reason``: snapshots show it.

    Raises:
        ConfigurationError: When ``reason`` is blank.

    Example:
        >>> model_spend_limit_error(ModelSpendRefusal("account acme used its 1,000,000 tokens today"))
        'the model spend limit refused the model call: account acme used its 1,000,000 tokens today'
    """

    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise ConfigurationError("ModelSpendRefusal.reason must not be blank")


@dataclass(frozen=True)
class ModelSpendReport:
    """What one model call used: the call and its usage as the runner reported it."""

    call: ModelCallIdentity
    usage: AgentUsage


@runtime_checkable
class ModelSpendLimit(Protocol):
    """An application's spend limit, asked before each model call and told what each call used.

    Both methods run inside the session's Steps, so each may run again after a crash or retry:
    ``check_model_call`` runs in every attempt before its model call, and ``record_model_usage``
    may report one call twice, so count a report once per ``report.call.usage_key``. An exception
    from either fails the Step attempt like a runner error, which retries it.

    Example:
        >>> class DailyTokens:
        ...     def __init__(self, limit: int) -> None:
        ...         self.limit, self.used = limit, {}
        ...     async def check_model_call(self, call):
        ...         if sum(self.used.values()) >= self.limit:
        ...             return ModelSpendRefusal("the daily token budget is used up")
        ...         return None
        ...     async def record_model_usage(self, report):
        ...         self.used[report.call.usage_key] = report.usage.total_tokens
        >>> isinstance(DailyTokens(1000), ModelSpendLimit)
        True
    """

    async def check_model_call(self, call: ModelCallIdentity) -> ModelSpendRefusal | None:
        """Return ``None`` to allow the call, or a refusal that ends the turn without it.

        The turn ends with ``last_turn_error`` from :func:`model_spend_limit_error`, with no retry.
        """
        ...

    async def record_model_usage(self, report: ModelSpendReport) -> None:
        """Count what one model call used; called after the call returned its usage."""
        ...


async def check_model_spend(
    limit: ModelSpendLimit | None, call: ModelCallIdentity
) -> ModelSpendRefusal | None:
    """Ask ``limit`` about ``call``; with no limit, every call is allowed.

    Raises:
        ConfigurationTypeError: When the limit returns something other than ``None`` or a refusal.

    Example:
        >>> import asyncio
        >>> call = ModelCallIdentity("SupportAgent", "session-42", "turn-1", "RunModel-1", 1)
        >>> asyncio.run(check_model_spend(None, call)) is None
        True
    """
    if limit is None:
        return None
    decision = await limit.check_model_call(call)
    if decision is not None and not isinstance(decision, ModelSpendRefusal):
        raise ConfigurationTypeError(
            "ModelSpendLimit.check_model_call must return None or a ModelSpendRefusal, "
            f"got {type(decision).__name__}"
        )
    return decision


def model_spend_limit_error(refusal: ModelSpendRefusal) -> str:
    """Return the ``last_turn_error`` of a turn that ``refusal`` ended.

    Example:
        >>> model_spend_limit_error(ModelSpendRefusal("over budget"))
        'the model spend limit refused the model call: over budget'
    """
    return f"{MODEL_SPEND_LIMIT_ERROR_PREFIX}: {refusal.reason}"
