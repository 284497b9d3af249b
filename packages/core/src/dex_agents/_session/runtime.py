"""``SessionRuntime``: what every Step of one ``AgentSessionFlow`` shares, built once per Flow."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from dex import Context, Stream

from dex_agents._event_writer import AgentEventWriter
from dex_agents._events import AgentEvent
from dex_agents._session.attempt_claims import AttemptClaims
from dex_agents._session.message_decode_cache import MessageDecodeCache
from dex_agents._session.movements import SessionMovements
from dex_agents._session.options import AgentSessionOptions
from dex_agents._session.runner_facade import RunnerFacade
from dex_agents._tracing.session_tracing import SessionTracing

__all__ = ["SessionRuntime"]


@dataclass(frozen=True)
class SessionRuntime:
    """The runner facade, options, AgentEvents Stream, movements, and tracing of one Flow type.

    Attributes:
        runner: Every call into the runner goes through it.
        options: The Flow type's session options.
        events: The Flow type's AgentEvents Stream.
        movements: Builds every movement to another Step.
        tracing: The Flow type's spans (``AgentSessionOptions.tracing``).
        flow_type: The Dex Flow type, for the spend limit's call identity.
        message_cache: The decoded window messages of this Worker's recent sessions.
        attempt_claims: The Worker's client for single-attempt tool start claims.
    """

    runner: RunnerFacade
    options: AgentSessionOptions
    events: Stream[AgentEvent]
    movements: SessionMovements
    tracing: SessionTracing
    flow_type: str = ""
    message_cache: MessageDecodeCache = field(default_factory=MessageDecodeCache, compare=False)
    attempt_claims: AttemptClaims = field(default_factory=AttemptClaims, compare=False)

    def event_writer(self, context: Context, turn_id: str | None) -> AgentEventWriter:
        """Return a writer stamping this Step execution and attempt on every event."""
        events = self.events
        return AgentEventWriter(
            lambda event: _write_event(events, context, event),
            turn_id=turn_id,
            step_execution_id=context.step_execution_id,
            attempt=max(context.attempt, 1),
        )

    @staticmethod
    def now() -> datetime:
        """The Worker clock, timezone-aware UTC."""
        return datetime.now(UTC)


def _write_event(events: Stream[AgentEvent], context: Context, event: AgentEvent) -> None:
    # In an async Step the write is queued on the attempt's output; the return value is unused.
    events.write(context, event)
