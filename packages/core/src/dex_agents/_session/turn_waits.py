"""How a turn-level call waits: one plan of reads, run by the async and the synchronous client.

The plan is a generator that yields what it needs next (the next event after a token, or the
snapshot) and receives the answer, so the waiting rules live once and each client only does the
I/O. It reads ``AgentEvents`` one message at a time with a server-side long poll, so a turn costs
one ``ReadStream`` per event and one ``get_agent_snapshot`` at the end (plus one per approval or
question raised, and one per idle long poll), never a snapshot poll loop.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeAlias

import grpc
from dex import DexServiceError, StreamMessage

from dex_agents._events import AgentEvent
from dex_agents._session.turn_results import (
    STREAM_POLL_SECONDS,
    TurnResult,
    TurnStatus,
    TurnTimeoutError,
    TurnTracker,
)
from dex_agents._values import AgentSnapshot
from dex_agents.exceptions import ConfigurationError, DexAgentsError

__all__ = [
    "NextEvent",
    "ReadSnapshot",
    "StreamStoreDisabledError",
    "TurnWaitPlan",
    "check_timeout",
    "raise_if_stream_store_disabled",
    "run_plan_async",
    "run_plan_sync",
    "turn_wait_plan",
]


class StreamStoreDisabledError(DexAgentsError):
    """The Dex server keeps no Stream messages, so a turn cannot be followed by its events."""


@dataclass(frozen=True)
class NextEvent:
    """The plan needs the next ``AgentEvents`` message after ``token`` (``None`` if none came).

    ``poll`` is the server-side long poll, whole seconds as Dex takes it; ``remaining`` is the
    time left, which an async read also enforces on its side.
    """

    token: str
    poll: timedelta
    remaining: float


@dataclass(frozen=True)
class ReadSnapshot:
    """The plan needs the session's snapshot."""


_RECHECK_POLL_SECONDS = 1.0
_Request: TypeAlias = NextEvent | ReadSnapshot
_Answer: TypeAlias = StreamMessage[AgentEvent] | AgentSnapshot | None
TurnWaitPlan: TypeAlias = Generator[_Request, _Answer, TurnResult]


def check_timeout(timeout: float) -> None:
    """Refuse a timeout that is not a positive number of seconds.

    Raises:
        ConfigurationError: ``timeout`` is not positive.
    """
    if not timeout > 0:
        raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")


def turn_wait_plan(tracker: TurnTracker, token: str, timeout: float) -> TurnWaitPlan:
    """Follow ``tracker``'s turn from ``token`` until it ends, waits for a person, or times out.

    Raises:
        TurnTimeoutError: Neither happened within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    # An interrupt whose event came before the snapshot showed it pending (the Step's commit not
    # yet visible) is looked at again after a short poll, not after the usual one.
    unconfirmed_interrupt = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TurnTimeoutError(tracker.session_id, tracker.turn_id, token, timeout)
        longest = _RECHECK_POLL_SECONDS if unconfirmed_interrupt else STREAM_POLL_SECONDS
        poll = timedelta(seconds=math.ceil(min(remaining, longest)))
        message = yield NextEvent(token, poll, remaining)
        if message is None:
            # An idle long poll: the end event may have been dropped (Streams are best effort).
            unconfirmed_interrupt = False
            snapshot = yield ReadSnapshot()
            assert isinstance(snapshot, AgentSnapshot)
            tracker.check_ended(snapshot)
            if tracker.done:
                return tracker.result(snapshot, token)
            continue
        assert isinstance(message, StreamMessage)
        token = message.resume_token
        raised = tracker.observe(message.value)
        if raised or tracker.done:
            snapshot = yield ReadSnapshot()
            assert isinstance(snapshot, AgentSnapshot)
            if raised:
                # Answered already (a later event says so), or not committed yet, when it is not
                # pending in the snapshot.
                tracker.check_waiting(snapshot)
                unconfirmed_interrupt = not tracker.done
            if tracker.done:
                while _end_not_committed(tracker, snapshot) and time.monotonic() < deadline:
                    snapshot = yield ReadSnapshot()
                    assert isinstance(snapshot, AgentSnapshot)
                return tracker.result(snapshot, token)


def _end_not_committed(tracker: TurnTracker, snapshot: AgentSnapshot) -> bool:
    """Whether the snapshot predates the commit of the turn's end event's Step.

    A Step writes its events while it runs and commits the session's state when it finishes, so
    a snapshot read right after ``turn_ended`` can still show the turn active, without its last
    message; read it again until the commit is visible.
    """
    if tracker.status not in _ENDED:
        return False  # a turn waiting for a person is still active, rightly
    state = snapshot.state
    return state is not None and state.active_turn_id == tracker.turn_id


_ENDED = frozenset({TurnStatus.COMPLETED, TurnStatus.FAILED, TurnStatus.CANCELLED})


async def run_plan_async(
    plan: TurnWaitPlan,
    next_event: Callable[[NextEvent], Awaitable[StreamMessage[AgentEvent] | None]],
    snapshot: Callable[[], Awaitable[AgentSnapshot]],
) -> TurnResult:
    """Run ``plan`` with the async client's reads."""
    request = next(plan)
    while True:
        answer: _Answer = (
            await next_event(request) if isinstance(request, NextEvent) else await snapshot()
        )
        try:
            request = plan.send(answer)
        except StopIteration as finished:
            return _result(finished)


def run_plan_sync(
    plan: TurnWaitPlan,
    next_event: Callable[[NextEvent], StreamMessage[AgentEvent] | None],
    snapshot: Callable[[], AgentSnapshot],
) -> TurnResult:
    """Run ``plan`` with the synchronous client's reads."""
    request = next(plan)
    while True:
        answer: _Answer = next_event(request) if isinstance(request, NextEvent) else snapshot()
        try:
            request = plan.send(answer)
        except StopIteration as finished:
            return _result(finished)


def raise_if_stream_store_disabled(error: DexServiceError, session_id: str) -> None:
    """Turn Dex's answer for a disabled Stream Store into a clear error.

    With ``streamStore.backend: disabled`` every Stream read answers ``FAILED_PRECONDITION``
    before it looks at the token (Stream RPCs need no Flow, so the code means nothing else).

    Raises:
        StreamStoreDisabledError: ``error`` is that answer.
    """
    if error.code is grpc.StatusCode.FAILED_PRECONDITION:
        raise StreamStoreDisabledError(
            f"cannot follow session {session_id}'s turn: the Dex server keeps no Stream messages "
            "(its Stream Store is disabled), and the turn-level calls read AgentEvents. Poll "
            "get_agent_snapshot instead, or enable the Stream Store."
        ) from error


def _result(finished: StopIteration) -> TurnResult:
    result = finished.value
    assert isinstance(result, TurnResult)
    return result
