"""Deadline-bounded polling, so tests wait for a condition instead of sleeping."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar, cast, overload

from dex_agents._values import AgentState, AgentStatus
from dex_agents.exceptions import DexAgentsError

if TYPE_CHECKING:
    from dex_agents._session.client import AgentSessionClient
    from dex_agents._values import AgentInterrupt, AgentSnapshot

ValueT = TypeVar("ValueT")

DEFAULT_WAIT_TIMEOUT_SECONDS = 30.0
"""How long `wait_until` polls before it gives up, unless told otherwise."""

_POLL_INTERVAL_SECONDS = 0.02


class WaitTimeoutError(DexAgentsError, TimeoutError):
    """Raised when a polled condition did not hold before its deadline.

    Attributes:
        description: What was being waited for.
        timeout: The deadline in seconds.
        last_value: The last value the probe returned.
    """

    def __init__(self, description: str, timeout: float, last_value: object) -> None:
        super().__init__(
            f"timed out after {timeout:g} s waiting for {description}; "
            f"the last check returned {last_value!r}"
        )
        self.description = description
        self.timeout = timeout
        self.last_value = last_value


@overload
async def wait_until(
    description: str,
    probe: Callable[[], Awaitable[ValueT | None]],
    timeout: float = DEFAULT_WAIT_TIMEOUT_SECONDS,
) -> ValueT: ...


@overload
async def wait_until(
    description: str,
    probe: Callable[[], ValueT | None],
    timeout: float = DEFAULT_WAIT_TIMEOUT_SECONDS,
) -> ValueT: ...


async def wait_until(
    description: str,
    probe: Callable[[], Awaitable[ValueT | None]] | Callable[[], ValueT | None],
    timeout: float = DEFAULT_WAIT_TIMEOUT_SECONDS,
) -> ValueT:
    """Poll ``probe`` until it returns a truthy value, and return that value.

    ``probe`` may be a plain function or a coroutine function. ``None``,
    ``False`` and other falsy results mean "not yet". An exception from the
    probe propagates at once, because a broken probe never becomes true.

    Raises:
        WaitTimeoutError: ``probe`` stayed falsy for ``timeout`` seconds; the
            message names ``description`` and the last value seen.

    Example:
        >>> import asyncio
        >>> marker = tmp_path / "ready"
        >>> marker.touch()
        >>> asyncio.run(wait_until("the ready file", marker.exists))
        True
    """
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return cast("ValueT", value)
        if time.monotonic() >= deadline:
            raise WaitTimeoutError(description, timeout, value)
        await asyncio.sleep(_POLL_INTERVAL_SECONDS)


async def wait_for_agent_snapshot(
    sessions: AgentSessionClient,
    session_id: str,
    probe: Callable[[AgentSnapshot], ValueT | None],
    description: str = "an agent snapshot to match",
    timeout: float = DEFAULT_WAIT_TIMEOUT_SECONDS,
) -> ValueT:
    """Poll ``get_agent_snapshot`` until ``probe(snapshot)`` is truthy; return it.

    Raises:
        WaitTimeoutError: The probe stayed falsy until the deadline; the message
            names ``description`` and the session's last status.

    Example:
        >>> import asyncio
        >>> from dex_agents.testing import in_process_worker
        >>> async def first_reply() -> str | None:
        ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
        ...         sessions = dex.sessions(flow)
        ...         await sessions.start_session("wait-example", "Hi")
        ...         reply = await wait_for_agent_snapshot(
        ...             sessions, "wait-example",
        ...             lambda snapshot: snapshot.messages[-1] if len(snapshot.messages) > 1 else None,
        ...             description="the first reply")
        ...         return reply.text
        >>> asyncio.run(first_reply())
        'Hello'
    """
    last_status: list[str] = ["no snapshot read yet"]

    async def check() -> ValueT | None:
        snapshot = await sessions.get_agent_snapshot(session_id)
        last_status[0] = _describe_snapshot(snapshot)
        return probe(snapshot)

    try:
        return await wait_until(f"{description} in session {session_id}", check, timeout)
    except WaitTimeoutError as timed_out:
        raise WaitTimeoutError(
            f"{timed_out.description} (last snapshot: {last_status[0]})",
            timeout,
            timed_out.last_value,
        ) from None


def turns_have_ended(state: AgentState | None, turns: int = 1) -> bool:
    """Whether the session has ended ``turns`` turns (or more) and waits for a user message: no
    active turn, status ``waiting_for_user_message``.

    Example:
        >>> turns_have_ended(AgentState(), 1)
        False
    """
    return (
        state is not None
        and state.turn_count >= turns
        and state.active_turn_id is None
        and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
    )


def turn_ended(turns: int = 1) -> Callable[[AgentSnapshot], AgentSnapshot | None]:
    """A ``wait_for_agent_snapshot`` probe: the snapshot once ``turns_have_ended(state, turns)``.

    Example:
        >>> import asyncio
        >>> from dex_agents.testing import in_process_worker
        >>> async def turns_after_reply() -> int:
        ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
        ...         sessions = dex.sessions(flow)
        ...         await sessions.start_session("turn-ended-example", "Hi")
        ...         snapshot = await wait_for_agent_snapshot(
        ...             sessions, "turn-ended-example", turn_ended(), "the first turn to end")
        ...         return snapshot.state.turn_count
        >>> asyncio.run(turns_after_reply())
        1
    """

    def probe(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        return snapshot if turns_have_ended(snapshot.state, turns) else None

    return probe


def pending_interrupt(snapshot: AgentSnapshot) -> AgentInterrupt | None:
    """A ``wait_for_agent_snapshot`` probe: the session's first pending interrupt (an approval or a
    question), ``None`` while there is none.

    Example:
        >>> from types import SimpleNamespace
        >>> pending_interrupt(SimpleNamespace(pending_interrupts=("approve refund-1",)))
        'approve refund-1'
    """
    return next(iter(snapshot.pending_interrupts), None)


def has_pending_interrupts(snapshot: AgentSnapshot) -> AgentSnapshot | None:
    """A ``wait_for_agent_snapshot`` probe: the snapshot once it has a pending interrupt.

    Example:
        >>> from types import SimpleNamespace
        >>> has_pending_interrupts(SimpleNamespace(pending_interrupts=())) is None
        True
    """
    return snapshot if snapshot.pending_interrupts else None


async def wait_for_turn_end(
    sessions: AgentSessionClient,
    session_id: str,
    turns: int = 1,
    timeout: float = DEFAULT_WAIT_TIMEOUT_SECONDS,
) -> AgentSnapshot:
    """The session's snapshot once it has ended ``turns`` turns and waits for a user message.

    Raises:
        WaitTimeoutError: The turn had not ended by the deadline; the message names the
            session's last status.

    Example:
        >>> import asyncio
        >>> from dex_agents.testing import in_process_worker
        >>> async def two_turns() -> list[str | None]:
        ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
        ...         sessions = dex.sessions(flow)
        ...         await sessions.start_session("turn-end-example", "Hi")
        ...         await wait_for_turn_end(sessions, "turn-end-example")
        ...         await sessions.send_user_message("turn-end-example", "Thanks")
        ...         snapshot = await wait_for_turn_end(sessions, "turn-end-example", turns=2)
        ...         return [message.text for message in snapshot.messages]
        >>> asyncio.run(two_turns())
        ['Hi', 'Hello', 'Thanks', 'Hello']
    """
    return await wait_for_agent_snapshot(
        sessions, session_id, turn_ended(turns), f"turn {turns} to end", timeout
    )


def _describe_snapshot(snapshot: AgentSnapshot) -> str:
    state = getattr(snapshot, "state", None)
    if state is None:
        return "session not started"
    return f"status {getattr(state, 'status', '?')}"
