"""Outcome checks: how a single-attempt tool says afterwards whether a lost call took effect.

A ``non_idempotent_write`` or ``unclassified`` call runs at most once. When its attempt is lost
(the Worker died, the attempt timed out), the session cannot know whether the write happened and
records ``outcome_unknown``. Most write APIs can answer that question afterwards: a payment
provider looks a payment up by its idempotency key, a ticket system searches by an external ID, a
database checks for the row. A tool that declares a :class:`ToolOutcomeCheck` in its
``ToolPolicy`` lets the session ask, in the ``CheckToolOutcome`` Step (retried like a ``read``
call), before anything is recorded:

| The check answers | The call records | ``AgentToolCall.outcome_check`` |
|---|---|---|
| :meth:`ToolOutcomeCheckResult.applied` | ``succeeded`` with the check's output | ``applied`` |
| :meth:`ToolOutcomeCheckResult.not_applied` | ``failed`` with :data:`TOOL_CALL_NOT_APPLIED_ERROR_PREFIX`, or runs once more with the same key when the check opts in (``run_again_if_not_applied``) | ``not_applied`` |
| :meth:`ToolOutcomeCheckResult.unknown` | ``outcome_unknown`` | ``unknown`` |
| the check raises on every attempt | ``outcome_unknown`` | ``check_failed`` |

Without a check nothing changes: a lost attempt records ``outcome_unknown``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, TypeAlias

from dex_agents.exceptions import ConfigurationError, ConfigurationTypeError

__all__ = [
    "TOOL_CALL_NOT_APPLIED_ERROR_PREFIX",
    "ToolOutcomeCheck",
    "ToolOutcomeCheckFunction",
    "ToolOutcomeCheckRequest",
    "ToolOutcomeCheckResult",
    "ToolOutcomeCheckStatus",
    "ToolOutcomeVerdict",
    "tool_call_not_applied_error",
]

TOOL_CALL_NOT_APPLIED_ERROR_PREFIX: Final = (
    "the tool call did not take effect: its attempt was lost and its outcome check found it "
    "not applied, so it is safe to call again"
)
"""Start of the error of a call whose outcome check answered *not applied*."""


def tool_call_not_applied_error(detail: str) -> str:
    """Return the error of a call that did not take effect: the prefix, ``": "``, and ``detail``.

    Example:
        >>> tool_call_not_applied_error("no refund with this key").endswith("no refund with this key")
        True
    """
    return (
        f"{TOOL_CALL_NOT_APPLIED_ERROR_PREFIX}: {detail}"
        if detail
        else (TOOL_CALL_NOT_APPLIED_ERROR_PREFIX)
    )


class ToolOutcomeVerdict(StrEnum):
    """What an outcome check found out about a lost call.

    Example:
        >>> ToolOutcomeVerdict("not_applied") is ToolOutcomeVerdict.NOT_APPLIED
        True
    """

    APPLIED = "applied"
    """The call took effect; its result is known."""
    NOT_APPLIED = "not_applied"
    """The call did not take effect."""
    UNKNOWN = "unknown"
    """The check cannot tell."""


class ToolOutcomeCheckStatus(StrEnum):
    """``AgentToolCall.outcome_check`` and the ``tool_call_finished`` field of the same name:
    whether, and with what answer, the session checked the outcome of a call whose attempt was
    lost. ``None`` (absent) when no check ran.

    Example:
        >>> ToolOutcomeCheckStatus.APPLIED.value
        'applied'
    """

    PENDING = "pending"
    """The call's attempt was lost and ``CheckToolOutcome`` is about to ask (never final)."""
    APPLIED = "applied"
    """The check confirmed that the call took effect: ``succeeded`` with the check's output."""
    NOT_APPLIED = "not_applied"
    """The check found the call not applied: ``failed``, or the call ran once more."""
    UNKNOWN = "unknown"
    """The check could not tell: ``outcome_unknown``."""
    CHECK_FAILED = "check_failed"
    """The check raised on every attempt: ``outcome_unknown``."""


@dataclass(frozen=True)
class ToolOutcomeCheckRequest:
    """What an outcome check receives: the lost call, and the key the tool itself was given.

    Attributes:
        tool_name: The tool's name.
        arguments: The call's arguments as JSON text, as the tool received them.
        idempotency_key: ``<flow_id>/<turn_id>/<tool_call_id>``, the key the tool was given; look
            the write up by it.
        flow_id: The session ID.
        turn_id: The turn of the call.
        tool_call_id: The model's tool call ID.
        attempt: One-based attempt of the ``CheckToolOutcome`` Step (a check is retried like a
            ``read`` call).

    Example:
        >>> request = ToolOutcomeCheckRequest("refund", '{"order": 7}', "s/turn-1/c1", "s", "turn-1", "c1", 1)
        >>> request.argument_values()["order"]
        7
    """

    tool_name: str
    arguments: str
    idempotency_key: str
    flow_id: str
    turn_id: str
    tool_call_id: str
    attempt: int = 1

    def argument_values(self) -> dict[str, object]:
        """The arguments decoded from JSON; blank text is no arguments.

        Raises:
            ConfigurationError: When the arguments are not a JSON object.
        """
        try:
            decoded: object = json.loads(self.arguments) if self.arguments.strip() else {}
        except ValueError as error:
            raise ConfigurationError(
                f"the arguments of {self.tool_name} are not JSON: {error}"
            ) from None
        if not isinstance(decoded, dict):
            raise ConfigurationError(
                f"the arguments of {self.tool_name} are not a JSON object: {self.arguments!r}"
            )
        return decoded


@dataclass(frozen=True)
class ToolOutcomeCheckResult:
    """An outcome check's answer; build it with :meth:`applied`, :meth:`not_applied`, or
    :meth:`unknown`.

    Attributes:
        verdict: What the check found out.
        output: The result to record for an applied call: the model sees it as if the call had
            returned it.
        note: Why, for people: it ends up in the record's ``error`` for a call that was not
            applied or stays unknown.

    Raises:
        ConfigurationError: When an applied result has no output, or another has one.

    Example:
        >>> ToolOutcomeCheckResult.applied('{"refund_id": "r-9"}').verdict.value
        'applied'
    """

    verdict: ToolOutcomeVerdict
    output: str | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        verdict = self.verdict
        if not isinstance(verdict, ToolOutcomeVerdict):
            try:
                verdict = ToolOutcomeVerdict(verdict)
            except ValueError:
                raise ConfigurationError(
                    f"ToolOutcomeCheckResult.verdict must be applied, not_applied or unknown, "
                    f"got {self.verdict!r}"
                ) from None
            object.__setattr__(self, "verdict", verdict)
        if verdict is ToolOutcomeVerdict.APPLIED and not isinstance(self.output, str):
            raise ConfigurationError(
                f"an applied outcome needs the output to record as text, got {self.output!r}"
            )
        if verdict is not ToolOutcomeVerdict.APPLIED and self.output is not None:
            raise ConfigurationError(f"a {verdict.value} outcome has no output")
        if self.note is not None and not isinstance(self.note, str):
            raise ConfigurationError(f"ToolOutcomeCheckResult.note must be text, got {self.note!r}")

    @classmethod
    def applied(cls, output: str, note: str | None = None) -> ToolOutcomeCheckResult:
        """The call took effect and ``output`` is its result (the model sees it)."""
        return cls(ToolOutcomeVerdict.APPLIED, output=output, note=note)

    @classmethod
    def not_applied(cls, note: str | None = None) -> ToolOutcomeCheckResult:
        """The call did not take effect."""
        return cls(ToolOutcomeVerdict.NOT_APPLIED, note=note)

    @classmethod
    def unknown(cls, note: str | None = None) -> ToolOutcomeCheckResult:
        """The check cannot tell; the call records ``outcome_unknown``."""
        return cls(ToolOutcomeVerdict.UNKNOWN, note=note)


ToolOutcomeCheckFunction: TypeAlias = Callable[
    [ToolOutcomeCheckRequest], "ToolOutcomeCheckResult | Awaitable[ToolOutcomeCheckResult]"
]
"""A sync or async function that answers whether a lost call took effect."""


@dataclass(frozen=True)
class ToolOutcomeCheck:
    """A single-attempt tool's outcome check; declare it in the tool's ``ToolPolicy``.

    The check runs only when a call's attempt was lost, in its own ``CheckToolOutcome`` Step with
    3 attempts, so it must only read. It may run on another Worker, days later.

    Attributes:
        check: Sync or async function of a :class:`ToolOutcomeCheckRequest` that returns a
            :class:`ToolOutcomeCheckResult`; a sync one runs in a worker thread. An exception fails
            the Step's attempt; after the last one the call records ``outcome_unknown``.
        run_again_if_not_applied: When the check answers *not applied*, run the call once more
            with the same idempotency key instead of recording ``failed``. The second run is
            single-attempt too, and a second loss goes through the check again (which then
            records ``failed`` for *not applied*: a call runs again at most once).

    Raises:
        ConfigurationTypeError: When ``check`` is not callable or ``run_again_if_not_applied`` is
            not a bool.

    Example:
        >>> from dex_agents import ToolEffect, ToolPolicy
        >>> async def refund_applied(request: ToolOutcomeCheckRequest) -> ToolOutcomeCheckResult:
        ...     refund = await payments.find(idempotency_key=request.idempotency_key)
        ...     if refund is None:
        ...         return ToolOutcomeCheckResult.not_applied("no refund with this key")
        ...     return ToolOutcomeCheckResult.applied(refund.to_json())
        >>> policy = ToolPolicy(
        ...     ToolEffect.NON_IDEMPOTENT_WRITE,
        ...     outcome_check=ToolOutcomeCheck(refund_applied, run_again_if_not_applied=True),
        ... )
    """

    check: ToolOutcomeCheckFunction
    run_again_if_not_applied: bool = False

    def __post_init__(self) -> None:
        if not callable(self.check):
            raise ConfigurationTypeError(
                f"ToolOutcomeCheck.check must be a function, got {type(self.check).__name__}"
            )
        if not isinstance(self.run_again_if_not_applied, bool):
            raise ConfigurationTypeError(
                "ToolOutcomeCheck.run_again_if_not_applied must be a bool, got "
                f"{self.run_again_if_not_applied!r}"
            )

    async def run(self, request: ToolOutcomeCheckRequest) -> ToolOutcomeCheckResult:
        """Run the check once: an async function directly, a sync one in a worker thread.

        Raises:
            ConfigurationTypeError: When the check returns anything but a ToolOutcomeCheckResult.
            Exception: Whatever the check raises.
        """
        if inspect.iscoroutinefunction(self.check):
            result: object = await self.check(request)
        else:
            result = await asyncio.to_thread(functools.partial(self.check, request))
            if inspect.isawaitable(result):
                result = await result
        if not isinstance(result, ToolOutcomeCheckResult):
            raise ConfigurationTypeError(
                f"the outcome check of {request.tool_name} returned {type(result).__name__}, "
                "not a ToolOutcomeCheckResult"
            )
        return result
