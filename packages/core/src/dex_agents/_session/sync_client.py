"""``SyncAgentSessionClient``: the session calls and the turn-level calls on the SDK's sync ``Client``.

For code that is not async (a script, a notebook cell, a Flask view). It covers what such code
needs around a turn: start, send, answer, cancel, the snapshot, the events, and the turn-level
calls, which follow the same wait plan as ``AgentSessionClient`` (``turn_waits``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import Any, TypeVar

from dex import (
    ActiveStepSearchMode,
    Client,
    DexServiceError,
    Flow,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    LongPollTimeoutError,
    RpcLockConflictError,
    StartFlowOptions,
    StreamMessage,
)

from dex_agents._events import AgentEvent
from dex_agents._session import client as _async_client
from dex_agents._session.flow import AgentSessionFlow
from dex_agents._session.turn_results import (
    DEFAULT_TURN_TIMEOUT_SECONDS,
    STREAM_POLL_SECONDS,
    TurnResult,
    TurnTracker,
)
from dex_agents._session.turn_waits import (
    NextEvent,
    ReadMessages,
    check_timeout,
    raise_if_stream_store_disabled,
    run_plan_sync,
    turn_wait_plan,
)
from dex_agents._text_validity import validate_session_id
from dex_agents._values import (
    AgentMessagesPage,
    AgentSnapshot,
    AgentState,
    AgentUserMessage,
    AnswerQuestionRequest,
    CancelTurnRequest,
    ListAgentMessagesRequest,
    ResolveInterruptRequest,
)
from dex_agents.exceptions import (
    ConfigurationError,
    ConfigurationTypeError,
    SessionFlowTypeError,
)

__all__ = ["SyncAgentSessionClient"]

_ResultT = TypeVar("_ResultT")
_CHECKED_SESSIONS_LIMIT = 10_000


class SyncAgentSessionClient:
    """``AgentSessionClient``'s session and turn-level calls on the SDK's synchronous ``Client``.

    Args:
        client: A ``dex.Client`` whose Registry holds ``flow``.
        flow: The registered ``AgentSessionFlow``.

    Raises:
        ConfigurationTypeError: When ``flow`` is not an ``AgentSessionFlow``.

    Example:
        >>> from dex import BlobCacheConfig, ClientOptions, Registry, open_blob_cache
        >>> cache = open_blob_cache(BlobCacheConfig(str(tmp_path / "sync-cache"), 1 << 24))
        >>> registry = Registry([flow], allow_async_handlers=True)
        >>> client = Client(registry, cache, ClientOptions(server_address="127.0.0.1:8801"))
        >>> SyncAgentSessionClient(client, flow).flow is flow
        True
        >>> client.close()
    """

    def __init__(self, client: Client, flow: Flow[Any]) -> None:
        if not isinstance(flow, AgentSessionFlow):
            raise ConfigurationTypeError(
                f"flow must be an AgentSessionFlow, got {type(flow).__name__}"
            )
        self._client = client
        self._flow = flow
        self._checked_sessions: set[str] = set()

    @property
    def flow(self) -> AgentSessionFlow:
        """The session Flow this client calls."""
        return self._flow

    def _check_session(self, session_id: str) -> None:
        """Check the ID, then, once per session, that the session is of this client's Flow type
        (as ``AgentSessionClient`` does)."""
        validate_session_id(session_id)
        if session_id in self._checked_sessions:
            return
        try:
            info = self._client.describe_flow(session_id)
        except FlowNotFoundError:
            return  # the RPC itself then raises the SDK's FlowNotActiveOrNotFoundError
        if info.flow_type != self._flow.get_flow_type():
            raise SessionFlowTypeError(session_id, self._flow.get_flow_type(), info.flow_type)
        if len(self._checked_sessions) < _CHECKED_SESSIONS_LIMIT:
            self._checked_sessions.add(session_id)

    def start_session(
        self,
        session_id: str,
        initial_message: str = "",
        *,
        session_settings: Mapping[str, object] | None = None,
        active_step_search_mode: ActiveStepSearchMode = (
            _async_client.AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE
        ),
        options: StartFlowOptions | None = None,
        plan_mode: bool = False,
    ) -> str:
        """Start session ``session_id``, as ``AgentSessionClient.start_session`` does.

        Raises:
            ConfigurationError: When ``session_settings`` is not a JSON object of at most 16 KiB.
            FlowAlreadyStartedError: When a session with this ID exists.
        """
        start_input, start_options = _async_client.session_start_arguments(
            session_id,
            initial_message,
            session_settings,
            active_step_search_mode,
            options,
            plan_mode,
            self._flow,
        )
        run_id = self._client.start_flow(self._flow, session_id, start_input, start_options)
        self._checked_sessions.add(session_id)
        return run_id

    def send_user_message(self, session_id: str, text: str, *, plan_mode: bool = False) -> bool:
        """Queue a user message; ``False`` for blank text, text the session cannot store, or
        ``plan_mode`` without plan mode (see ``AgentSessionClient.send_user_message``)."""
        self._check_session(session_id)
        if _async_client.refuses_user_text(self._flow, text):
            return False
        return self._client.invoke_rpc(
            self._flow.send_user_message,
            session_id,
            AgentUserMessage(text=text, plan_mode=plan_mode),
        )

    def resolve_interrupt(
        self,
        session_id: str,
        interrupt_id: str,
        *,
        approved: bool,
        rejection_message: str | None = None,
    ) -> bool:
        """Approve or reject a pending approval; retries lock conflicts for 5 seconds.

        Raises:
            RpcLockConflictError: When the lock stays taken for 5 seconds.
        """
        self._check_session(session_id)
        if _async_client.refuses_reply_text(rejection_message):
            return False
        request = ResolveInterruptRequest(
            interrupt_id=interrupt_id, approved=approved, rejection_message=rejection_message
        )
        return _retry_lock_conflicts(
            lambda: self._client.invoke_rpc(self._flow.resolve_interrupt, session_id, request)
        )

    def answer_question(self, session_id: str, interrupt_id: str, answer: str) -> bool:
        """Answer a pending question; retries lock conflicts for 5 seconds.

        Raises:
            RpcLockConflictError: When the lock stays taken for 5 seconds.
        """
        self._check_session(session_id)
        if _async_client.refuses_reply_text(answer):
            return False
        request = AnswerQuestionRequest(interrupt_id=interrupt_id, answer=answer)
        return _retry_lock_conflicts(
            lambda: self._client.invoke_rpc(self._flow.answer_question, session_id, request)
        )

    def cancel_turn(self, session_id: str, turn_id: str) -> bool:
        """Stop turn ``turn_id`` now, with no new turn; retries lock conflicts for 5 seconds.

        Raises:
            RpcLockConflictError: When the locks stay taken for 5 seconds.
        """
        self._check_session(session_id)
        request = CancelTurnRequest(turn_id=turn_id)
        return _retry_lock_conflicts(
            lambda: self._client.invoke_rpc(self._flow.cancel_turn, session_id, request)
        )

    def get_agent_snapshot(self, session_id: str) -> AgentSnapshot:
        """Return the session's state, newest messages, interrupts, tool calls, and usage."""
        self._check_session(session_id)
        return self._client.invoke_rpc(self._flow.get_agent_snapshot, session_id)

    def get_agent_state(self, session_id: str) -> AgentState:
        """Return the session's ``AgentState`` alone, without the transcript (see
        ``AgentSessionClient.get_agent_state``)."""
        self._check_session(session_id)
        return self._client.invoke_rpc(self._flow.get_agent_state, session_id)

    def latest_event_token(self, session_id: str) -> str:
        """The ``AgentEvents`` resume token after the newest event, ``""`` when there is none.

        Raises:
            StreamStoreDisabledError: The Dex server keeps no Stream messages.
        """
        validate_session_id(session_id)
        try:
            page = self._client.list_stream_messages(session_id, self._flow.agent_events, 1)
        except DexServiceError as error:
            raise_if_stream_store_disabled(error, session_id)
            raise
        return page.messages[0].resume_token if page.messages else ""

    def stream_events(
        self,
        session_id: str,
        resume_token: str = "",
        *,
        poll_timeout: timedelta = timedelta(seconds=STREAM_POLL_SECONDS),
    ) -> Iterator[StreamMessage[AgentEvent]]:
        """Yield the session's events after ``resume_token`` as they come, without end.

        Raises:
            StreamStoreDisabledError: The Dex server keeps no Stream messages.
        """
        validate_session_id(session_id)
        token = resume_token
        while True:
            message = self._next_event(
                session_id, NextEvent(token, poll_timeout, poll_timeout.total_seconds())
            )
            if message is not None:
                token = message.resume_token
                yield message

    def run_turn(
        self, session_id: str, message: str, *, timeout: float = DEFAULT_TURN_TIMEOUT_SECONDS
    ) -> TurnResult:
        """Send ``message`` and wait, as ``AgentSessionClient.run_turn`` does.

        The timeout may run over by up to a second: a synchronous read cannot be cut short, and
        Dex takes long polls in whole seconds.

        Raises:
            ConfigurationError: ``message`` is blank, cannot be stored, or was refused, or
                ``timeout`` is not positive.
            TurnTimeoutError: The turn did not end or stop in time; it keeps running.
            StreamStoreDisabledError: The Dex server keeps no Stream messages.
        """
        _async_client.check_turn_message(self._flow, message)
        check_timeout(timeout)
        token = self.latest_event_token(session_id)
        try:
            accepted = self.send_user_message(session_id, message)
        except (FlowNotFoundError, FlowNotActiveOrNotFoundError):
            self.start_session(session_id, message)
            accepted = True
        if not accepted:
            raise ConfigurationError(f"session {session_id} refused the message")
        return self._follow(TurnTracker(session_id, wait_for_start=True), token, timeout)

    def wait_for_turn(
        self,
        session_id: str,
        after: str | TurnResult,
        *,
        turn_id: str | None = None,
        timeout: float = DEFAULT_TURN_TIMEOUT_SECONDS,
    ) -> TurnResult:
        """Wait from a point of the event Stream, as ``AgentSessionClient.wait_for_turn`` does.

        Raises:
            ConfigurationError: ``timeout`` is not positive, or ``after`` is of another session.
            TurnTimeoutError: The turn did not end or stop in time.
            StreamStoreDisabledError: The Dex server keeps no Stream messages.
        """
        validate_session_id(session_id)
        check_timeout(timeout)
        tracker, token = _async_client.tracker_after(session_id, after, turn_id)
        return self._follow(tracker, token, timeout)

    def _follow(self, tracker: TurnTracker, token: str, timeout: float) -> TurnResult:
        session_id = tracker.session_id
        return run_plan_sync(
            turn_wait_plan(tracker, token, timeout),
            lambda request: self._next_event(session_id, request),
            lambda: self.get_agent_snapshot(session_id),
            lambda request: self._turn_messages(session_id, request),
            lambda: self.get_agent_state(session_id),
        )

    def _turn_messages(self, session_id: str, request: ReadMessages) -> AgentMessagesPage:
        # As the async client's: the window alone first (dex_agents._session.recent_messages).
        self._check_session(session_id)
        page_request = ListAgentMessagesRequest(
            after_sequence=request.after_sequence, limit=request.limit
        )
        recent = self._client.invoke_rpc(
            self._flow.list_recent_agent_messages, session_id, page_request
        )
        if recent.page is not None:
            return recent.page
        return self._client.invoke_rpc(self._flow.list_agent_messages, session_id, page_request)

    def _next_event(self, session_id: str, request: NextEvent) -> StreamMessage[AgentEvent] | None:
        try:
            return self._client.read_stream(
                session_id, self._flow.agent_events, request.token, timeout=request.poll
            )
        except LongPollTimeoutError:
            return None
        except DexServiceError as error:
            raise_if_stream_store_disabled(error, session_id)
            raise


def _retry_lock_conflicts(call: Callable[[], _ResultT]) -> _ResultT:
    deadline = time.monotonic() + _async_client.LOCK_CONFLICT_RETRY_SECONDS
    backoff = 0.05
    while True:
        try:
            return call()
        except RpcLockConflictError:
            if time.monotonic() + backoff > deadline:
                raise
            time.sleep(backoff)
            backoff = min(backoff * 2, 0.5)
