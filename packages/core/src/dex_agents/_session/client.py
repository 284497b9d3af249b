"""``AgentSessionClient``: start sessions and call their RPCs through the SDK's ``AsyncClient``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any, Final, TypeVar

from dex import (
    ActiveStepSearchMode,
    AsyncClient,
    DexServiceError,
    Flow,
    FlowConfig,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    IdReusePolicy,
    LongPollTimeoutError,
    RpcLockConflictError,
    StartFlowOptions,
    StreamMessage,
)

from dex_agents._events import AgentEvent
from dex_agents._session.flow import AgentSessionFlow
from dex_agents._session.settings import validate_session_settings
from dex_agents._session.size_budgets import reply_text_problem, user_text_problem
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
    run_plan_async,
    turn_wait_plan,
)
from dex_agents._text_validity import is_blank_text, validate_session_id
from dex_agents._values import (
    AgentMessagesPage,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentState,
    AgentUserMessage,
    AnswerQuestionRequest,
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    ExecutePlanRequest,
    ListAgentMessagesRequest,
    ResolveInterruptRequest,
    SteerUserMessageRequest,
    UpdateSessionSettingsRequest,
)
from dex_agents.exceptions import ConfigurationError, ConfigurationTypeError, SessionFlowTypeError

__all__ = [
    "AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE",
    "LOCK_CONFLICT_RETRY_SECONDS",
    "AgentSessionClient",
    "check_turn_message",
    "refuses_reply_text",
    "refuses_user_text",
    "session_start_arguments",
    "tracker_after",
]

AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE: Final = ActiveStepSearchMode.WITH_WAIT_FOR
"""Makes a session searchable by the Steps it waits in, such as ``ActiveStepTypes =
"AwaitToolApproval"``; pass it in ``FlowConfig.active_step_search_mode``.
"""

LOCK_CONFLICT_RETRY_SECONDS: Final = 5.0
"""How long the client retries an RPC that lost an Attribute lock to a concurrent Step."""

_LOCK_CONFLICT_BACKOFF_SECONDS: Final = 0.05
# Sessions whose Flow type a client checked; a session keeps its type, so each is asked once.
_CHECKED_SESSIONS_LIMIT: Final = 10_000
_ResultT = TypeVar("_ResultT")


class AgentSessionClient:
    """Starts agent sessions of one ``AgentSessionFlow`` and calls their RPCs.

    Every method checks the session ID first (``validate_session_id``) and serves only sessions of
    its own Flow type: the first call for a session asks Dex for the session's Flow type (one
    ``describe_flow``), and a session of another type raises ``SessionFlowTypeError``, a
    ``FlowNotActiveOrNotFoundError``, so it reads as not found.

    Args:
        client: An ``AsyncClient`` whose Registry holds ``flow``.
        flow: The registered ``AgentSessionFlow``.

    Raises:
        ConfigurationTypeError: When ``flow`` is not an ``AgentSessionFlow``.

    Example:
        >>> import asyncio
        >>> from dex_agents.testing import in_process_worker, wait_for_agent_snapshot
        >>> async def first_turn() -> list[str | None]:
        ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
        ...         sessions = AgentSessionClient(dex.client, flow)
        ...         await sessions.start_session("session-42", "Find my open tickets")
        ...         snapshot = await wait_for_agent_snapshot(sessions, "session-42",
        ...             lambda snapshot: snapshot if len(snapshot.messages) == 2 else None)
        ...         return [message.text for message in snapshot.messages]
        >>> asyncio.run(first_turn())
        ['Find my open tickets', 'Hello']
    """

    def __init__(self, client: AsyncClient, flow: Flow[Any]) -> None:
        if not isinstance(flow, AgentSessionFlow):
            raise ConfigurationTypeError(
                f"flow must be an AgentSessionFlow, got {type(flow).__name__}"
            )
        self._client = client
        self._flow = flow
        self._checked_sessions: dict[str, None] = {}

    @property
    def flow(self) -> AgentSessionFlow:
        """The session Flow this client calls."""
        return self._flow

    async def _check_session(self, session_id: str) -> None:
        """Check the ID, then, once per session, that the session is of this client's Flow type."""
        validate_session_id(session_id)
        if session_id in self._checked_sessions:
            return
        try:
            info = await self._client.describe_flow(session_id)
        except FlowNotFoundError:
            # The RPC itself then raises the SDK's usual FlowNotActiveOrNotFoundError.
            return
        if info.flow_type != self._flow.get_flow_type():
            raise SessionFlowTypeError(session_id, self._flow.get_flow_type(), info.flow_type)
        self._remember_checked(session_id)

    def _remember_checked(self, session_id: str) -> None:
        if len(self._checked_sessions) >= _CHECKED_SESSIONS_LIMIT:
            # Forget the oldest; dicts keep insertion order.
            del self._checked_sessions[next(iter(self._checked_sessions))]
        self._checked_sessions[session_id] = None

    async def start_session(
        self,
        session_id: str,
        initial_message: str = "",
        *,
        session_settings: Mapping[str, object] | None = None,
        active_step_search_mode: ActiveStepSearchMode = AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE,
        options: StartFlowOptions | None = None,
        plan_mode: bool = False,
    ) -> str:
        """Start session ``session_id``; a non-blank ``initial_message`` starts its first turn.

        The session is searchable by the Steps it waits in, so
        ``search_flows('ActiveStepTypes = "AwaitToolApproval"', 50)`` finds sessions waiting for
        an approval; pass ``ActiveStepSearchMode.DISABLED`` to turn that off.

        Args:
            session_id: The Flow ID, which is the session ID.
            initial_message: The first user message; blank starts no turn.
            session_settings: The session's settings JSON object.
            active_step_search_mode: Which waiting Steps Flow search indexes.
            options: Further start options; its ``config_override`` keeps its other fields.
            plan_mode: Start the first turn as a planning turn (needs plan mode; ignored
                without it).

        Returns:
            The run ID Dex assigned.

        Raises:
            ConfigurationError: When ``session_id`` is not a valid session ID (see
                ``validate_session_id``), or ``session_settings`` is not a JSON object of at most
                16 KiB and 64 levels; nothing is started.
            FlowAlreadyStartedError: When a session with this ID exists.
            DexServiceError: When Dex refuses the start.
        """
        start_input, start_options = session_start_arguments(
            session_id,
            initial_message,
            session_settings,
            active_step_search_mode,
            options,
            plan_mode,
            self._flow,
        )
        run_id = await self._client.start_flow(self._flow, session_id, start_input, start_options)
        self._remember_checked(session_id)
        return run_id

    async def send_user_message(
        self, session_id: str, text: str, *, plan_mode: bool = False
    ) -> bool:
        """Queue a user message; it starts a turn when the session waits for one.

        Returns:
            ``False`` for blank text, for text the session cannot store (a lone surrogate, or
            over ``MAX_STORED_MESSAGE_BYTES`` as stored; such text is not sent), and for
            ``plan_mode`` while plan mode is off; ``True`` once the message is queued.
        """
        await self._check_session(session_id)
        if refuses_user_text(self._flow, text):
            return False
        return await self._client.invoke_rpc(
            self._flow.send_user_message,
            session_id,
            AgentUserMessage(text=text, plan_mode=plan_mode),
        )

    async def resolve_interrupt(
        self,
        session_id: str,
        interrupt_id: str,
        *,
        approved: bool,
        rejection_message: str | None = None,
    ) -> bool:
        """Approve or reject a pending approval.

        Retries ``RpcLockConflictError`` (a Step holding ``PendingInterrupts``) for 5 seconds.

        Returns:
            ``False`` when the interrupt is not pending or is past its deadline, or
            ``rejection_message`` holds a lone surrogate or is over ``MAX_TOOL_RESULT_BYTES``.

        Raises:
            RpcLockConflictError: When the lock stays taken for 5 seconds.
        """
        await self._check_session(session_id)
        if refuses_reply_text(rejection_message):
            return False
        request = ResolveInterruptRequest(
            interrupt_id=interrupt_id, approved=approved, rejection_message=rejection_message
        )
        return await _retry_lock_conflicts(
            lambda: self._client.invoke_rpc(self._flow.resolve_interrupt, session_id, request)
        )

    async def answer_question(self, session_id: str, interrupt_id: str, answer: str) -> bool:
        """Answer a pending question (``ask_user``, or a tool's or task's question).

        Retries ``RpcLockConflictError`` (a Step holding ``PendingInterrupts``) for 5 seconds.
        Decline a question with ``resolve_interrupt(..., approved=False)``.

        Returns:
            ``False`` when the interrupt is not a pending question, is past its deadline, or the
            answer is blank, not an allowed choice, holds a lone surrogate, or is over
            ``MAX_TOOL_RESULT_BYTES``.

        Raises:
            RpcLockConflictError: When the lock stays taken for 5 seconds.
        """
        await self._check_session(session_id)
        if refuses_reply_text(answer):
            return False
        request = AnswerQuestionRequest(interrupt_id=interrupt_id, answer=answer)
        return await _retry_lock_conflicts(
            lambda: self._client.invoke_rpc(self._flow.answer_question, session_id, request)
        )

    async def execute_plan(self, session_id: str, revision: int) -> bool:
        """Approve plan revision ``revision`` for execution; an executing turn starts with it.

        Retries ``RpcLockConflictError`` (a concurrent ``execute_plan``) for 5 seconds, then
        returns ``False``.

        Returns:
            ``True`` only while the session waits for a user message, the plan has this revision
            and is draft or active, no execution of it is pending, and nothing is queued, steered,
            or pending.
        """
        await self._check_session(session_id)
        request = ExecutePlanRequest(revision=revision)
        try:
            return await _retry_lock_conflicts(
                lambda: self._client.invoke_rpc(self._flow.execute_plan, session_id, request)
            )
        except RpcLockConflictError:
            return False

    async def steer_user_message(
        self,
        session_id: str,
        text: str | None = None,
        *,
        message_id: str | None = None,
        plan_mode: bool = False,
    ) -> bool:
        """Steer the running turn with new ``text`` or with the queued message ``message_id``.

        The turn ends at its next safe Step boundary and a new turn starts with every steered
        message, in order. While no turn is active, ``text`` is queued like ``send_user_message``.

        Returns:
            ``False`` for both or neither of ``text`` and ``message_id``, blank text, text the
            session cannot store (as for ``send_user_message``), a message no longer queued, or
            a turn that does not accept steering.

        Raises:
            ChannelMessageNotFoundError: When the session consumed the queued message while the
                RPC ran; nothing changed, so reload the snapshot and let the user choose again.
        """
        await self._check_session(session_id)
        if text is not None and refuses_user_text(self._flow, text):
            return False
        request = SteerUserMessageRequest(text=text, message_id=message_id, plan_mode=plan_mode)
        return await self._client.invoke_rpc(self._flow.steer_user_message, session_id, request)

    async def delete_queued_message(self, session_id: str, message_id: str) -> bool:
        """Delete the queued message ``message_id`` (from ``AgentSnapshot.queued_messages``).

        Returns:
            ``False`` for a message that is no longer queued.

        Raises:
            ChannelMessageNotFoundError: When the session consumed it while the RPC ran.
        """
        await self._check_session(session_id)
        request = DeleteQueuedMessageRequest(message_id=message_id)
        return await self._client.invoke_rpc(self._flow.delete_queued_message, session_id, request)

    async def cancel_turn(self, session_id: str, turn_id: str) -> bool:
        """Stop turn ``turn_id`` now, with no new turn.

        Cancels its model call or compaction (the answer is dropped) and every wait; a started tool
        call runs to its end, and a started tool task is abandoned. Retries
        ``RpcLockConflictError`` for 5 seconds.

        Returns:
            ``True`` when the request is recorded, also for every further call for the same turn
            while its cancellation is in flight; ``False`` when no turn is active (also once the
            cancelled turn has ended), ``turn_id`` names another turn, or the turn does not accept
            cancellation.

        Raises:
            RpcLockConflictError: When the locks stay taken for 5 seconds.
        """
        await self._check_session(session_id)
        request = CancelTurnRequest(turn_id=turn_id)
        return await _retry_lock_conflicts(
            lambda: self._client.invoke_rpc(self._flow.cancel_turn, session_id, request)
        )

    async def update_session_settings(
        self, session_id: str, session_settings: Mapping[str, object]
    ) -> bool:
        """Replace the session's settings; the next turn starts with them (``{}`` clears them).

        Returns:
            ``False`` before the session initialized.

        Raises:
            ConfigurationError: When ``session_settings`` is not a JSON object of at most 16 KiB
                and 64 levels; nothing is sent.
        """
        validate_session_settings(session_settings)
        await self._check_session(session_id)
        request = UpdateSessionSettingsRequest(session_settings=dict(session_settings))
        return await self._client.invoke_rpc(
            self._flow.update_session_settings, session_id, request
        )

    async def get_agent_snapshot(self, session_id: str) -> AgentSnapshot:
        """Return the session's state, newest messages, interrupts, tool calls, and usage."""
        await self._check_session(session_id)
        return await self._client.invoke_rpc(self._flow.get_agent_snapshot, session_id)

    async def get_agent_state(self, session_id: str) -> AgentState:
        """Return the session's ``AgentState`` alone: whether a turn is active, its ID, the turn
        count, and the last turn's error, without the messages, records, and Channels that
        ``get_agent_snapshot`` loads and carries (a turn-state check costs the same at turn 100 as
        at turn 1).

        Raises:
            SessionFlowTypeError: The session is of another Flow type.
            FlowNotActiveOrNotFoundError: No running session has that ID.

        Example::

            state = await sessions.get_agent_state("session-1")
            if state.active_turn_id is None:
                print("waiting for a user message after", state.turn_count, "turns")
        """
        await self._check_session(session_id)
        return await self._client.invoke_rpc(self._flow.get_agent_state, session_id)

    async def list_agent_messages(
        self, session_id: str, *, after_sequence: int | None = None, limit: int = 50
    ) -> AgentMessagesPage:
        """Return one page of stored messages after ``after_sequence``, oldest first."""
        await self._check_session(session_id)
        return await self._client.invoke_rpc(
            self._flow.list_agent_messages,
            session_id,
            ListAgentMessagesRequest(after_sequence=after_sequence, limit=limit),
        )

    async def latest_event_token(self, session_id: str) -> str:
        """The ``AgentEvents`` resume token after the newest event, ``""`` when there is none.

        Reading from it sees only what comes next; pass it to ``wait_for_turn`` or
        ``stream_events``. One ``ListStreamMessages`` call.

        Raises:
            ConfigurationError: ``session_id`` is not a valid session ID.
            StreamStoreDisabledError: The Dex server keeps no Stream messages.
        """
        validate_session_id(session_id)
        try:
            page = await self._client.list_stream_messages(session_id, self._flow.agent_events, 1)
        except DexServiceError as error:
            raise_if_stream_store_disabled(error, session_id)
            raise
        return page.messages[0].resume_token if page.messages else ""

    async def stream_events(
        self,
        session_id: str,
        resume_token: str = "",
        *,
        poll_timeout: timedelta = timedelta(seconds=STREAM_POLL_SECONDS),
    ) -> AsyncIterator[StreamMessage[AgentEvent]]:
        """Yield the session's events after ``resume_token`` as they come, without end.

        ``""`` starts at the oldest retained event. Each message carries the event
        (``message.value``) and the token to resume after it (``message.resume_token``): keep
        the last one to continue after a reconnect. A long poll of ``poll_timeout`` that sees
        nothing is asked again. Events are best effort: the snapshot is the truth.

        Raises:
            StreamStoreDisabledError: The Dex server keeps no Stream messages.

        Example:
            >>> import asyncio
            >>> from dex_agents.testing import in_process_worker
            >>> async def first_event_type() -> str:
            ...     async with in_process_worker([flow], server_address, tmp_path / "c") as dex:
            ...         sessions = dex.sessions(flow)
            ...         await sessions.run_turn("events-example", "Hi")
            ...         async for message in sessions.stream_events("events-example"):
            ...             return message.value.type
            ...     return ""
            >>> asyncio.run(first_event_type())
            'turn_started'
        """
        validate_session_id(session_id)
        token = resume_token
        while True:
            message = await self._next_event(
                session_id, NextEvent(token, poll_timeout, poll_timeout.total_seconds() + 5)
            )
            if message is None:
                continue
            token = message.resume_token
            yield message

    async def run_turn(
        self,
        session_id: str,
        message: str,
        *,
        timeout: float = DEFAULT_TURN_TIMEOUT_SECONDS,
    ) -> TurnResult:
        """Send ``message`` and wait until the turn it starts ends or waits for a person.

        Starts session ``session_id`` with ``message`` when it does not exist; a stopped session
        raises ``FlowAlreadyStartedError`` (``start_session`` never reuses an ID). A message sent
        while another turn runs is queued, and the wait is for the turn it starts after that one.
        The wait follows ``AgentEvents`` (one read per event), and stops at the first approval or
        question that waits (``TurnStatus.WAITING_FOR_PERSON``): answer it, then pass the result
        to ``wait_for_turn`` to follow the turn on. A turn that completed (or was cancelled or
        steered) ends with one read of the turn's own messages (the window alone, through the
        internal ``list_recent_agent_messages``; ``list_agent_messages`` when a kept chunk holds
        one of them), a failed one with ``get_agent_state`` and that read, so its cost does not
        grow with the session;
        a turn waiting for a person ends with one ``get_agent_snapshot``.

        Args:
            session_id: The session, started when it does not exist.
            message: The user message; it must not be blank.
            timeout: Seconds to wait for the turn to end or stop.

        Returns:
            The turn's status, last assistant text, tool calls, pending interrupts and error.

        Raises:
            ConfigurationError: ``message`` is blank or cannot be stored (a lone surrogate, or too
                large; nothing is sent), the session refused it, or ``timeout`` is not positive.
            TurnTimeoutError: The turn did not end or stop in time; it keeps running, and the
                error carries the token to wait on.
            StreamStoreDisabledError: The Dex server keeps no Stream messages.

        Example:
            >>> import asyncio
            >>> from dex_agents.testing import in_process_worker
            >>> async def ask() -> TurnResult:
            ...     async with in_process_worker([flow], server_address, tmp_path / "c") as dex:
            ...         return await dex.sessions(flow).run_turn("turn-example", "Hi")
            >>> result = asyncio.run(ask())
            >>> result.status, result.text
            (<TurnStatus.COMPLETED: 'completed'>, 'Hello')
        """
        check_turn_message(self._flow, message)
        check_timeout(timeout)
        token = await self.latest_event_token(session_id)
        try:
            accepted = await self.send_user_message(session_id, message)
        except (FlowNotFoundError, FlowNotActiveOrNotFoundError):
            # A stopped session lands here too; start_session then raises FlowAlreadyStartedError.
            await self.start_session(session_id, message)
            accepted = True
        if not accepted:
            raise ConfigurationError(f"session {session_id} refused the message")
        tracker = TurnTracker(session_id, wait_for_start=True)
        return await self._follow(tracker, token, timeout)

    async def wait_for_turn(
        self,
        session_id: str,
        after: str | TurnResult,
        *,
        turn_id: str | None = None,
        timeout: float = DEFAULT_TURN_TIMEOUT_SECONDS,
    ) -> TurnResult:
        """Wait from a point of the event Stream until a turn ends or waits for a person.

        Pass a ``TurnResult`` to follow its turn on (after answering its approval, say; the tool
        calls it saw are kept), or a resume token (``latest_event_token``, or
        ``TurnTimeoutError.resume_token``) to follow ``turn_id``, or without ``turn_id`` the first
        turn with an event after the token.

        Raises:
            ConfigurationError: ``timeout`` is not positive, or ``after`` is a result of another
                session.
            TurnTimeoutError: The turn did not end or stop in time.
            StreamStoreDisabledError: The Dex server keeps no Stream messages.
        """
        validate_session_id(session_id)
        check_timeout(timeout)
        tracker, token = tracker_after(session_id, after, turn_id)
        return await self._follow(tracker, token, timeout)

    async def _follow(self, tracker: TurnTracker, token: str, timeout: float) -> TurnResult:
        session_id = tracker.session_id
        return await run_plan_async(
            turn_wait_plan(tracker, token, timeout),
            lambda request: self._next_event(session_id, request),
            lambda: self.get_agent_snapshot(session_id),
            lambda request: self._turn_messages(session_id, request),
            lambda: self.get_agent_state(session_id),
        )

    async def _turn_messages(self, session_id: str, request: ReadMessages) -> AgentMessagesPage:
        # The window alone nearly always holds a turn's messages; only when it does not is the
        # whole kept transcript loaded (see dex_agents._session.recent_messages).
        await self._check_session(session_id)
        page_request = ListAgentMessagesRequest(
            after_sequence=request.after_sequence, limit=request.limit
        )
        recent = await self._client.invoke_rpc(
            self._flow.list_recent_agent_messages, session_id, page_request
        )
        if recent.page is not None:
            return recent.page
        return await self._client.invoke_rpc(
            self._flow.list_agent_messages, session_id, page_request
        )

    async def _next_event(
        self, session_id: str, request: NextEvent
    ) -> StreamMessage[AgentEvent] | None:
        try:
            async with asyncio.timeout(request.remaining):
                return await self._client.read_stream(
                    session_id, self._flow.agent_events, request.token, timeout=request.poll
                )
        except (LongPollTimeoutError, TimeoutError):
            return None
        except DexServiceError as error:
            raise_if_stream_store_disabled(error, session_id)
            raise


def session_start_arguments(
    session_id: str,
    initial_message: str,
    session_settings: Mapping[str, object] | None,
    active_step_search_mode: ActiveStepSearchMode,
    options: StartFlowOptions | None,
    plan_mode: bool,
    flow: AgentSessionFlow,
) -> tuple[AgentSessionStartInput, StartFlowOptions]:
    """The Flow input and start options of ``start_session`` (async and synchronous alike).

    Raises:
        ConfigurationError: When ``session_id`` is not a valid session ID, ``session_settings``
            is not a JSON object of at most 16 KiB and 64 levels, or ``initial_message`` holds a
            lone surrogate or is over ``MAX_STORED_MESSAGE_BYTES`` as ``flow`` stores it.
    """
    validate_session_id(session_id)
    validate_session_settings(session_settings or {})
    if not is_blank_text(initial_message):
        problem = user_text_problem(flow.runner.build_user_message, initial_message)
        if problem is not None:
            raise ConfigurationError(f"initial_message cannot be stored: {problem}")
    base = options if options is not None else StartFlowOptions()
    config = base.config_override if base.config_override is not None else FlowConfig()
    # Dex's DEFAULT reuses the ID of a closed Flow; a session ID names one session for good, so
    # starting a stopped or ended session raises FlowAlreadyStartedError on every engine.
    reuse = base.id_reuse_policy
    start_options = replace(
        base,
        config_override=replace(config, active_step_search_mode=active_step_search_mode),
        id_reuse_policy=IdReusePolicy.DISALLOW if reuse is IdReusePolicy.DEFAULT else reuse,
    )
    start_input = AgentSessionStartInput(
        initial_message=initial_message,
        session_settings=dict(session_settings or {}),
        plan_mode=plan_mode,
    )
    return start_input, start_options


def refuses_user_text(flow: AgentSessionFlow, text: str) -> bool:
    """Whether the client answers ``False`` for user ``text`` without sending it: a lone
    surrogate, or a message over ``MAX_STORED_MESSAGE_BYTES`` as ``flow``'s runner stores it.
    The RPC checks the same, so a caller past the client gets ``False`` too."""
    return user_text_problem(flow.runner.build_user_message, text) is not None


def check_turn_message(flow: AgentSessionFlow, message: str) -> None:
    """Refuse a ``run_turn`` message that starts no turn, before anything is sent.

    Raises:
        ConfigurationError: ``message`` is blank, holds a lone surrogate, or is too large to store.
    """
    if is_blank_text(message):
        raise ConfigurationError("run_turn needs a message that is not blank")
    problem = user_text_problem(flow.runner.build_user_message, message)
    if problem is not None:
        raise ConfigurationError(f"run_turn cannot send the message: {problem}")


def refuses_reply_text(text: str | None) -> bool:
    """Whether the client answers ``False`` for an answer or rejection message without sending
    it: a lone surrogate, or over ``MAX_TOOL_RESULT_BYTES``."""
    return reply_text_problem(text, "the text") is not None


def tracker_after(
    session_id: str, after: str | TurnResult, turn_id: str | None
) -> tuple[TurnTracker, str]:
    """The tracker and token ``wait_for_turn`` starts from.

    Raises:
        ConfigurationError: ``after`` is a result of another session.
    """
    if isinstance(after, TurnResult):
        if after.session_id != session_id:
            raise ConfigurationError(
                f"the result is of session {after.session_id}, not of {session_id}"
            )
        return TurnTracker.continuing(after), after.resume_token
    return TurnTracker(session_id, turn_id), after


async def _retry_lock_conflicts(call: Callable[[], Awaitable[_ResultT]]) -> _ResultT:
    deadline = time.monotonic() + LOCK_CONFLICT_RETRY_SECONDS
    backoff = _LOCK_CONFLICT_BACKOFF_SECONDS
    while True:
        try:
            return await call()
        except RpcLockConflictError:
            if time.monotonic() + backoff > deadline:
                raise
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 0.5)
