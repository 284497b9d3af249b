"""``dex-agents demo``: a support agent with a scripted model on the embedded engine.

The demo starts ``dex-local-engine`` as a child process on a database in
``./.dex-agents/``, serves a Stepwise support agent with a pull Worker in this
process, and streams one turn to the terminal: an order lookup (a READ tool)
and a refund (a NON_IDEMPOTENT_WRITE tool that needs approval). The engine's
database persists, so ``dex-agents demo --session ID`` reattaches after the
process was killed and the session continues where it stopped.

The refund goes to the demo's order store (``refunds.json`` in the directory), keyed by the
call's idempotency key, and the payment provider takes a moment to confirm it. The refund tool
declares an outcome check against that store: kill the demo while the refund runs, reattach, and
the session asks the store instead of recording ``outcome_unknown`` (confirmed after a restart,
or run once more when the refund never reached the store).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import importlib.util
import json
import os
import re
import secrets
import sys
import threading
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, TextIO

from dex import (
    AsyncClient,
    DexServiceError,
    FlowNotFoundError,
    LongPollTimeoutError,
)

from dex_agents import (
    AgentEvent,
    AgentEventType,
    AgentInterrupt,
    AgentMessage,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSnapshot,
    AgentStatus,
    AgentToolCallStatus,
    DexAgentsError,
    MessageRole,
    ToolEffect,
    ToolOutcomeCheck,
    ToolOutcomeCheckRequest,
    ToolOutcomeCheckResult,
    ToolOutcomeCheckStatus,
)
from dex_agents.stepwise import (
    AgentDefinition,
    FunctionTool,
    ModelClient,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    ToolCallContext,
    function_tool,
    stepwise_agent_session_flow,
)
from dex_agents.testing import EngineLogs, EngineProcess, EngineStartError, in_process_worker

DEMO_FLOW_TYPE = "SupportAgentDemo"
DEFAULT_DEMO_DIRECTORY = Path(".dex-agents")
DEFAULT_DEMO_MESSAGE = "Hi! Order 7 arrived broken. Can I get a refund?"
APPROVAL_PENDING_EXIT_STATUS = 3
"""Exit status when stdin closed while an approval was pending."""
TURN_FAILED_EXIT_STATUS = 4
"""Exit status when the turn the demo followed failed."""
LITELLM_API_ENV = "DEX_AGENTS_LITELLM_API"
"""Environment variable with ``--api``'s value when the option is not given."""

_STREAM_POLL = timedelta(seconds=2)
_WORKER_READY_TIMEOUT_SECONDS = 60.0
_ORDERS: dict[str, dict[str, str | int]] = {
    "7": {"item": "a ceramic teapot", "status": "delivered", "total_cents": 2599},
}
_FINISHED_EVENTS = frozenset(
    {
        AgentEventType.TURN_COMPLETED,
        AgentEventType.TURN_FAILED,
        AgentEventType.TURN_STEERED,
        AgentEventType.TURN_CANCELLED,
    }
)


class DemoModelApi(StrEnum):
    """Which provider API ``--model`` calls: OpenAI-compatible servers mostly speak only Chat
    Completions (vLLM, Ollama, llama.cpp, LM Studio, most gateways)."""

    CHAT_COMPLETIONS = "chat_completions"
    RESPONSES = "responses"


class ApprovalMode(StrEnum):
    """How the demo answers an approval: at the keyboard, or from a flag."""

    ASK = "ask"
    APPROVE = "approve"
    REJECT = "reject"


@dataclass(frozen=True)
class DemoOptions:
    """What ``dex-agents demo`` was asked to do.

    Attributes:
        session_id: Reattach to this session instead of starting a new one.
        approval: Ask at the keyboard (stdin), or approve or reject without asking.
        directory: Where the engine database, logs and blob cache live.
        message: The user message to send: the first of a new session (``None``:
            ``DEFAULT_DEMO_MESSAGE``), or with ``session_id`` the next one of that session, whose
            turn the demo then follows.
        model: A LiteLLM model name, such as ``openai/gpt-5-mini``, to run the agent on a real
            provider with the key from the environment; ``None`` keeps the scripted model.
        api_base: The provider endpoint for ``model``, such as a proxy; ``None`` for the default.
        api: The provider API ``model`` calls; ``None`` lets ``LiteLLMModelClient`` choose (Chat
            Completions with an ``api_base``, the Responses API for OpenAI models without).
    """

    session_id: str | None = None
    approval: ApprovalMode = ApprovalMode.ASK
    directory: Path = DEFAULT_DEMO_DIRECTORY
    message: str | None = None
    model: str | None = None
    api_base: str | None = None
    api: DemoModelApi | None = None


class DemoError(DexAgentsError):
    """A failure the demo explains to the user: what failed and what to do."""


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> dict[str, str | int]:
    """Look up an order by its ID."""
    order = _ORDERS.get(order_id)
    if order is None:
        return {"order_id": order_id, "status": "not found"}
    return {"order_id": order_id, **order}


REFUND_CONFIRMATION_SECONDS: Final = 1.0
"""How long the demo's payment provider takes to confirm a refund it has already taken: the
window in which killing the demo loses the refund's attempt."""


class DemoRefunds:
    """The demo's order store of refunds, by idempotency key, in one JSON file.

    One demo process uses a directory at a time (its lock), so a plain rewrite is enough.

    Example:
        >>> refunds = DemoRefunds(tmp_path / "refunds.json")
        >>> refunds.record("s/turn-1/c1", "Refunded 25.99 USD on order 7.")
        >>> refunds.find("s/turn-1/c1")
        'Refunded 25.99 USD on order 7.'
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def all(self) -> dict[str, str]:
        """Every refund text by idempotency key."""
        if not self.path.exists():
            return {}
        loaded: dict[str, str] = json.loads(self.path.read_text(encoding="utf-8"))
        return loaded

    def find(self, idempotency_key: str) -> str | None:
        """The refund taken with ``idempotency_key``, or ``None``."""
        return self.all().get(idempotency_key)

    def record(self, idempotency_key: str, text: str) -> None:
        """Take a refund; the same key again changes nothing (the provider deduplicates)."""
        refunds = self.all()
        refunds.setdefault(idempotency_key, text)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(refunds, indent=1), encoding="utf-8")
        temporary.replace(self.path)


def _refund_tool(refunds: DemoRefunds) -> FunctionTool:
    async def refund_applied(request: ToolOutcomeCheckRequest) -> ToolOutcomeCheckResult:
        text = refunds.find(request.idempotency_key)
        if text is None:
            return ToolOutcomeCheckResult.not_applied("the order store has no refund with this key")
        return ToolOutcomeCheckResult.applied(text)

    @function_tool(
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        # A lost refund is looked up in the order store; one that never got there runs again.
        outcome_check=ToolOutcomeCheck(refund_applied, run_again_if_not_applied=True),
    )
    async def refund_order(order_id: str, amount_cents: int, context: ToolCallContext) -> str:
        """Refund part of an order."""
        text = (
            f"Refunded {amount_cents / 100:.2f} USD on order {order_id} "
            f"(idempotency key {context.idempotency_key})."
        )
        refunds.record(context.idempotency_key, text)
        await asyncio.sleep(REFUND_CONFIRMATION_SECONDS)
        return text

    return refund_order


def demo_model_reply(request: ModelRequest) -> ScriptedModelReply:
    """The scripted support model: look the order up, then ask to refund it, then report."""
    user_text = ScriptedModelClient.user_texts(request)[-1]
    results = ScriptedModelClient.tool_results(request)
    order_id = _order_id(user_text)
    if not results:
        return ScriptedModelReply(
            text=f"Let me look up order {order_id}.",
            tool_calls=[ScriptedToolCall("lookup_order", {"order_id": order_id})],
        )
    if len(results) == 1 and "refund" in user_text.lower():
        amount = _ORDERS.get(order_id, {}).get("total_cents", 0)
        return ScriptedModelReply(
            text=f"I found order {order_id}: {results[0].output}. I will refund it in full.",
            tool_calls=[
                ScriptedToolCall("refund_order", {"order_id": order_id, "amount_cents": amount})
            ],
        )
    return ScriptedModelReply(text=f"Done. {results[-1].output}")


_REAL_MODEL_INSTRUCTIONS = (
    "You help customers with their orders. Look an order up with lookup_order before you act on "
    "it, and refund it with refund_order only when the customer asks for a refund."
)


def build_demo_flow(
    model: str | None = None,
    api_base: str | None = None,
    api: DemoModelApi | None = None,
    directory: Path = DEFAULT_DEMO_DIRECTORY,
) -> AgentSessionFlow:
    """The demo's Stepwise support agent Flow: the scripted model, or a LiteLLM ``model``; its
    refunds go to the order store in ``directory``.

    Raises:
        DemoError: ``model`` is given but LiteLLM is not installed, cannot route the model, or
            finds no API key for it in the environment.
    """
    if model is None:
        client: ModelClient = ScriptedModelClient(demo_model_reply)
        instructions = "You help customers with their orders."
    else:
        client = _litellm_client(model, api_base, api)
        instructions = _REAL_MODEL_INSTRUCTIONS
    agent = AgentDefinition(
        name="support",
        instructions=instructions,
        model=client,
        tools=[lookup_order, _refund_tool(DemoRefunds(directory / "refunds.json"))],
    )
    return stepwise_agent_session_flow(agent, flow_type=DEMO_FLOW_TYPE)


_PROVIDER_API_KEYS: Final = {
    "anthropic": "ANTHROPIC_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "xai": "XAI_API_KEY",
}
"""The one API key LiteLLM needs for a model of these providers (``provider/model``), checked
before LiteLLM's import, which takes seconds: a missing key is told at once."""


def _missing_provider_key(model: str) -> str | None:
    """The key of ``_PROVIDER_API_KEYS`` that ``model`` needs and the environment lacks."""
    key = _PROVIDER_API_KEYS.get(model.partition("/")[0])
    return key if key is not None and key not in os.environ else None


def _missing_key_error(model: str, missing: list[str]) -> DemoError:
    return DemoError(
        f"model {model} needs {', '.join(missing)} in the environment; set it, or run the "
        "demo without --model to use the scripted model"
    )


def _litellm_client(model: str, api_base: str | None, api: DemoModelApi | None) -> ModelClient:
    missing_key = _missing_provider_key(model)
    if missing_key is not None and importlib.util.find_spec("litellm") is not None:
        raise _missing_key_error(model, [missing_key])
    try:
        # dex_agents.litellm first: it keeps LiteLLM on its bundled cost map before the import.
        from dex_agents.litellm import (
            CHAT_COMPLETIONS_API,
            RESPONSES_API,
            LiteLLMApi,
            LiteLLMModelClient,
        )
    except ImportError as error:
        raise DemoError(
            f'--model needs LiteLLM: install it with pip install "dex-agents[litellm]" ({error})'
        ) from error
    import litellm

    try:
        apis: dict[DemoModelApi, LiteLLMApi] = {
            DemoModelApi.CHAT_COMPLETIONS: CHAT_COMPLETIONS_API,
            DemoModelApi.RESPONSES: RESPONSES_API,
        }
        client = LiteLLMModelClient(
            model, api=None if api is None else apis[api], api_base=api_base
        )
    except ValueError as error:
        raise DemoError(str(error)) from error
    missing = litellm.validate_environment(model=model, api_base=api_base).get("missing_keys")
    if missing:
        raise _missing_key_error(model, missing)
    return client


async def run_demo(options: DemoOptions, output: TextIO = sys.stdout) -> int:
    """Run the demo until the turn ends; returns the exit status.

    Raises:
        DemoError: The engine or Worker could not start, or the session is unknown.
    """
    terminal = _Terminal(output)
    options.directory.mkdir(parents=True, exist_ok=True)
    with _exclusive_directory(options.directory):
        return await _run_in_directory(options, terminal)


async def _run_in_directory(options: DemoOptions, terminal: _Terminal) -> int:
    # Built first: a model that cannot run fails before any process starts.
    flow = build_demo_flow(options.model, options.api_base, options.api, options.directory)
    terminal.progress(f"starting engine on {options.directory / 'engine.db'}...")
    engine = await _start_engine(options.directory)
    serving = False
    try:
        terminal.progress("waiting for worker...")
        async with in_process_worker(
            [flow],
            engine.server_address,
            options.directory / "blob-cache",
            stop_drain_timeout=timedelta(seconds=5),
            registration_timeout=timedelta(seconds=_WORKER_READY_TIMEOUT_SECONDS),
        ) as dex:
            serving = True
            session = _DemoSession(dex.sessions(flow), dex.client, flow, options, terminal)
            return await session.run()
    except Exception as failure:
        if serving:
            raise
        raise DemoError(f"the Worker did not register with the engine: {failure!r}") from failure
    finally:
        await engine.stop()


@contextmanager
def _exclusive_directory(directory: Path) -> Iterator[None]:
    """Hold a lock on the directory, so two demos never serve one database.

    The kernel drops the lock when the process dies, even by SIGKILL, so a
    reattach after a crash is never refused.
    """
    lock_path = directory / "demo.lock"
    with lock_path.open("a+") as lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as failure:
            lock_file.seek(0)
            holder = lock_file.read().strip() or "another process"
            raise DemoError(
                f"another dex-agents demo (process {holder}) is using {directory}. Wait for it "
                "to finish or stop it, or pass --directory to use another directory."
            ) from failure
        lock_file.truncate(0)
        lock_file.write(str(os.getpid()))
        lock_file.flush()
        yield


async def _start_engine(directory: Path) -> EngineProcess:
    logs = EngineLogs.in_directory(directory, "engine")
    try:
        return await EngineProcess.start_local(directory / "engine.db", logs)
    except EngineStartError as failure:
        raise DemoError(
            f"could not start the local engine: {failure}\nThe engine log is {logs.stderr}."
        ) from failure


class _Terminal:
    """Everything the demo prints, flushed at once so a pipe sees it live.

    Model and tool text reaches these lines, so every control character (ESC of a terminal
    escape sequence, a carriage return, a C1 control) and every bidirectional override prints
    escaped, as ``\\x1b`` or ``\\u202e``: no text can move the cursor, recolour the screen or
    disguise the approval prompt. Model text keeps its newlines; a line keeps none.
    """

    def __init__(self, output: TextIO) -> None:
        self._output = output
        self._in_text = False

    def progress(self, text: str) -> None:
        self.line(f"... {text}")

    def line(self, text: str = "") -> None:
        if self._in_text:
            self._output.write("\n")
            self._in_text = False
        self._output.write(terminal_safe_text(text) + "\n")
        self._output.flush()

    def text(self, text: str) -> None:
        if not self._in_text:
            self._output.write("assistant: ")
            self._in_text = True
        self._output.write(terminal_safe_text(text, keep_newlines=True))
        self._output.flush()


# Bidirectional embeddings, overrides and isolates reorder what follows them on screen.
_BIDI_CONTROLS: Final = frozenset(
    "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def terminal_safe_text(text: str, *, keep_newlines: bool = False) -> str:
    """Return ``text`` with control characters and bidi controls escaped for a terminal.

    Example:
        >>> print(terminal_safe_text("ok\\x1b[2K\\rfake \\u202eline"))
        ok\\x1b[2K\\x0dfake \\u202eline
    """
    if text.isprintable() and not (_BIDI_CONTROLS & set(text)):
        return text
    return "".join(_terminal_safe_character(character, keep_newlines) for character in text)


def _terminal_safe_character(character: str, keep_newlines: bool) -> str:
    if character == "\n" and keep_newlines:
        return character
    if character in _BIDI_CONTROLS or unicodedata.category(character) == "Cc":
        code = ord(character)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return character


class _DemoSession:
    def __init__(
        self,
        sessions: AgentSessionClient,
        client: AsyncClient,
        flow: AgentSessionFlow,
        options: DemoOptions,
        terminal: _Terminal,
    ) -> None:
        self._sessions = sessions
        self._client = client
        self._flow = flow
        self._options = options
        self._terminal = terminal
        self._answered: set[str] = set()
        # Calls whose result this run showed (stored, from their record, or their event), and
        # calls the conversation showed requested without a result: the end of the followed turn
        # shows the stored results of those it never saw finish (their event can come before the
        # Stream token while their record is not yet committed).
        self._shown_finished: set[str] = set()
        self._awaited_results: set[str] = set()
        self._text_attempts: dict[str, int] = {}
        # The turn that was running when --message was sent: its end is not the one followed.
        self._earlier_turn: str | None = None
        self._failed = False
        # The turn_failed event's error: the snapshot read right after it may predate the commit
        # of the Step that wrote it, so its state may not hold the error yet.
        self._event_error: str | None = None

    async def run(self) -> int:
        session_id = self._options.session_id or f"demo-{secrets.token_hex(4)}"
        if self._options.session_id is not None:
            await self._started_snapshot(session_id)  # an unknown ID fails before anything else
        self._announce(session_id)
        try:
            if self._options.session_id is None:
                message = self._options.message or DEFAULT_DEMO_MESSAGE
                self._terminal.line(f"user: {message}")
                await self._sessions.start_session(session_id, message)
                return await self._follow(session_id, "")
            if self._options.message is not None:
                return await self._continue(session_id, self._options.message)
            token = await self._reattach(session_id)
            if token is None:
                return 0
            return await self._follow(session_id, token)
        except asyncio.CancelledError:
            # Ctrl+C: the session lives on in the engine database.
            self._terminal.line(f"Interrupted. Resume with: {self._resume_command(session_id)}")
            raise

    def _announce(self, session_id: str) -> None:
        self._terminal.line(f"Session ID: {session_id}")
        self._terminal.line(
            f"If this process stops, resume with: {self._resume_command(session_id)}"
        )

    def _resume_command(self, session_id: str) -> str:
        return f"dex-agents demo --session {session_id}{self._directory_flag()}"

    def _directory_flag(self) -> str:
        if self._options.directory == DEFAULT_DEMO_DIRECTORY:
            return ""
        return f" --directory {self._options.directory}"

    async def _reattach(self, session_id: str) -> str | None:
        """Show the stored conversation; the Stream token to follow from, or None when done."""
        # The token first: the Worker already serves, and what it does while the conversation is
        # read must not fall between the two.
        token = await self._stream_end(session_id)
        snapshot = await self._show_conversation(session_id)
        if _turn_finished(snapshot):
            self._terminal.line(
                "The session waits for the next user message; its turn finished. Send one with: "
                f'{self._resume_command(session_id)} --message "..."'
            )
            return None
        self._terminal.line("The turn is still running; following it.")
        return token

    async def _continue(self, session_id: str, text: str) -> int:
        """Send the next user message of the session and follow the turn that answers it.

        A message sent while a turn runs waits in the queue: that turn is shown but not waited
        for, the turn after it is.
        """
        snapshot = await self._show_conversation(session_id)
        token = await self._stream_end(session_id)
        if snapshot.state is not None and snapshot.state.active_turn_id is not None:
            self._earlier_turn = snapshot.state.active_turn_id
            self._terminal.line(
                f"{self._earlier_turn} is still running; the message waits for it to finish."
            )
        self._terminal.line(f"user: {text}")
        if not await self._sessions.send_user_message(session_id, text):
            raise DemoError(
                f"session {session_id} refused the message (a blank message, or the session "
                "has ended). Start a new one with: dex-agents demo"
            )
        return await self._follow(session_id, token)

    async def _show_conversation(self, session_id: str) -> AgentSnapshot:
        snapshot = await self._started_snapshot(session_id)
        finished = await self._newest_finished_calls(session_id)
        checks = {
            call_id: str(event.payload_json()["outcome_check"])
            for call_id, event in finished.items()
            if event.payload_json().get("outcome_check")
        }
        self._terminal.line("Conversation so far:")
        for message in snapshot.messages:
            self._terminal.line(_render_message(message, checks))
            if message.tool_call_id is None:
                continue
            if message.role == MessageRole.TOOL:
                self._shown_finished.add(message.tool_call_id)
                self._awaited_results.discard(message.tool_call_id)
            else:
                self._awaited_results.add(message.tool_call_id)
        self._show_finished_calls(snapshot)
        # A call's event is written before its Step commits: the newest events show calls that
        # finished before the Stream token was taken but are not in the snapshot yet.
        for call_id, event in finished.items():
            if call_id in self._awaited_results:
                self._render(event)
        return snapshot

    def _show_finished_calls(self, snapshot: AgentSnapshot) -> None:
        """The running turn's finished calls whose results are not stored messages yet.

        A result is stored with the turn's next model call, so a call that finished before the
        Stream token was taken is in neither the conversation nor the followed events: its record
        is the only place that shows it.
        """
        stored = {message.tool_call_id for message in snapshot.messages if message.tool_call_id}
        for record in snapshot.tool_calls:
            if record.status not in _FINISHED_CALL_STATUSES or record.tool_call_id in stored:
                continue
            checked = _CHECK_NOTES.get(record.outcome_check or "", "")
            self._terminal.line(f"<- {record.tool_name}: {record.status}{checked}")
            self._shown_finished.add(record.tool_call_id)

    async def _newest_finished_calls(self, session_id: str) -> dict[str, AgentEvent]:
        """The ``tool_call_finished`` event of every call among the newest events, by tool call
        ID (a stored message does not say whether an outcome check settled its call)."""
        page = await self._client.list_stream_messages(
            session_id, self._flow.agent_events, _CHECKED_EVENTS_PAGE
        )
        finished: dict[str, AgentEvent] = {}
        for message in page.messages:
            event: AgentEvent = message.value
            if event.type == AgentEventType.TOOL_CALL_FINISHED:
                finished[str(event.payload_json().get("tool_call_id"))] = event
        return finished

    async def _stream_end(self, session_id: str) -> str:
        """The Stream token after the newest event: the snapshot already shows what is stored."""
        page = await self._client.list_stream_messages(session_id, self._flow.agent_events, 1)
        return page.messages[0].resume_token if page.messages else ""

    async def _snapshot(self, session_id: str) -> AgentSnapshot:
        try:
            return await self._sessions.get_agent_snapshot(session_id)
        except (FlowNotFoundError, DexServiceError) as failure:
            raise DemoError(
                f"no session {session_id} in {self._options.directory / 'engine.db'} ({failure}). "
                "Start a new one with: dex-agents demo"
            ) from failure

    async def _started_snapshot(self, session_id: str) -> AgentSnapshot:
        snapshot = await self._snapshot(session_id)
        if snapshot.state is None:
            raise DemoError(
                f"session {session_id} has not started yet. Start a new one with: dex-agents demo"
            )
        return snapshot

    async def _follow(self, session_id: str, token: str) -> int:
        if await self._answer_pending_approvals(session_id) == APPROVAL_PENDING_EXIT_STATUS:
            return APPROVAL_PENDING_EXIT_STATUS
        while True:
            try:
                message = await self._client.read_stream(
                    session_id, self._flow.agent_events, token, timeout=_STREAM_POLL
                )
            except LongPollTimeoutError:
                # Streams are best effort; the snapshot is the truth.
                snapshot = await self._snapshot(session_id)
                # A queued message (--message) starts the followed turn soon: not finished yet.
                if _turn_finished(snapshot) and not snapshot.queued_messages:
                    # Streams are best effort: without the turn's event, the state tells.
                    self._failed = snapshot.state is not None and bool(
                        snapshot.state.last_turn_error
                    )
                    return self._finish(session_id, snapshot)
                if await self._answer_pending_approvals(session_id) != 0:
                    return APPROVAL_PENDING_EXIT_STATUS
                continue
            token = message.resume_token
            event: AgentEvent = message.value
            self._render(event)
            if event.type == AgentEventType.INTERRUPT_RAISED and (
                await self._answer_pending_approvals(session_id) != 0
            ):
                return APPROVAL_PENDING_EXIT_STATUS
            if event.type in _FINISHED_EVENTS and event.turn_id != self._earlier_turn:
                self._failed = event.type == AgentEventType.TURN_FAILED
                if self._failed:
                    error = event.payload_json().get("error")
                    self._event_error = error if isinstance(error, str) and error else None
                return self._finish(session_id, await self._snapshot(session_id))

    def _finish(self, session_id: str, snapshot: AgentSnapshot) -> int:
        for message in snapshot.messages:
            call_id = message.tool_call_id
            if call_id is None or message.role != MessageRole.TOOL:
                continue
            if call_id in self._awaited_results and call_id not in self._shown_finished:
                check = message.outcome_check
                self._terminal.line(_render_message(message, {call_id: check} if check else {}))
        state = snapshot.state
        if self._failed:
            error = (state.last_turn_error if state is not None else None) or self._event_error
            self._terminal.line(
                f"The turn failed: {error or 'no error was recorded'}. {self._failure_hint(error)}"
            )
        self._terminal.line(
            f"Turn finished. Session {session_id} waits for the next message; send it with: "
            f'{self._resume_command(session_id)} --message "..."'
        )
        return TURN_FAILED_EXIT_STATUS if self._failed else 0

    def _failure_hint(self, error: str | None) -> str:
        """What to do about a failed turn, in one sentence."""
        options = self._options
        if options.model is None:
            return "Run again with --verbose to see the Worker's tracebacks."
        if (
            options.api_base is not None
            and options.api is DemoModelApi.RESPONSES
            and error is not None
            and ("404" in error or "NotFound" in error)
        ):
            return (
                f"The server at {options.api_base} does not serve the Responses API; most "
                "OpenAI-compatible servers speak only Chat Completions: use --api chat_completions."
            )
        where = f" and --api-base {options.api_base}" if options.api_base else ""
        return (
            f"Check --model {options.model}{where}, the API key, and the provider's status; "
            "run again with --verbose to see the Worker's tracebacks."
        )

    async def _answer_pending_approvals(self, session_id: str) -> int:
        snapshot = await self._snapshot(session_id)
        for interrupt in snapshot.pending_interrupts:
            if interrupt.interrupt_id in self._answered:
                continue
            decision = await self._decide(session_id, interrupt)
            if decision is None:
                return APPROVAL_PENDING_EXIT_STATUS
            approved, rejection = decision
            accepted = await self._sessions.resolve_interrupt(
                session_id, interrupt.interrupt_id, approved=approved, rejection_message=rejection
            )
            self._answered.add(interrupt.interrupt_id)
            if not accepted:
                self._terminal.line("That approval is no longer pending (answered or expired).")
        return 0

    async def _decide(
        self, session_id: str, interrupt: AgentInterrupt
    ) -> tuple[bool, str | None] | None:
        request = f"{interrupt.tool_name}({interrupt.arguments or ''})"
        if self._options.approval is ApprovalMode.APPROVE:
            self._terminal.line(f"Approval needed for {request}: approving (--approve).")
            return True, None
        if self._options.approval is ApprovalMode.REJECT:
            self._terminal.line(f"Approval needed for {request}: rejecting (--reject).")
            return False, "The user rejected this call."
        while True:
            self._terminal.line(f"Approve {request}? Answer y or n:")
            answer = await _read_stdin_line()
            if not answer:
                self._terminal.line(
                    "No answer: stdin is closed. The approval stays pending. Answer it with: "
                    f"dex-agents demo --session {session_id}{self._directory_flag()} "
                    "--approve (or --reject)"
                )
                return None
            choice = answer.strip().lower()
            if choice in ("y", "yes"):
                return True, None
            if choice in ("n", "no"):
                return False, "The user rejected this call."
            self._terminal.line(f"Please answer y or n, not {answer.strip()!r}.")

    def _render(self, event: AgentEvent) -> None:
        payload = event.payload_json()
        field = _payload_text(payload)
        match event.type:
            case AgentEventType.TEXT_DELTA:
                self._render_text(event, field("text"))
            case AgentEventType.TURN_STARTED:
                self._terminal.line(f"-- {event.turn_id} started")
            case AgentEventType.TOOL_CALL_DEFERRED:
                approval = ", needs approval" if payload.get("requires_approval") else ""
                self._terminal.line(
                    f"-> {field('tool_name')} requested ({field('effect')}{approval})"
                )
            case AgentEventType.TOOL_CALL_STARTED:
                self._terminal.line(f"-> running {field('tool_name')}")
            case AgentEventType.TOOL_CALL_FINISHED:
                if payload.get("tool_call_id") in self._shown_finished:
                    return
                self._shown_finished.add(str(payload.get("tool_call_id")))
                checked = _CHECK_NOTES.get(str(payload.get("outcome_check")), "")
                self._terminal.line(f"<- {field('tool_name')}: {field('status')}{checked}")
            case AgentEventType.INTERRUPT_RAISED:
                self._terminal.line(f"?? {field('tool_name')} waits for approval")
            case AgentEventType.INTERRUPT_RESOLVED:
                verdict = "approved" if payload.get("approved") else "rejected"
                self._terminal.line(f"!! approval {verdict}")
            case AgentEventType.TURN_COMPLETED:
                self._terminal.line(f"-- {event.turn_id} completed")
            case AgentEventType.TURN_FAILED:
                # The reason follows on one line once the state is read (_finish).
                self._terminal.line(f"-- {event.turn_id} failed")
            case _:
                pass

    def _render_text(self, event: AgentEvent, text: str) -> None:
        step = event.step_execution_id or ""
        seen = self._text_attempts.get(step)
        if seen is not None and event.attempt < seen:
            return  # partial text of an attempt that a retry replaced
        if seen is not None and event.attempt > seen:
            self._terminal.line(f"(the model call was retried: attempt {event.attempt})")
        self._text_attempts[step] = event.attempt
        self._terminal.text(text)


_CHECKED_EVENTS_PAGE: Final = 200
"""How many of the newest events the conversation view reads for outcome check answers."""

_FINISHED_CALL_STATUSES: Final = frozenset(
    {
        AgentToolCallStatus.SUCCEEDED,
        AgentToolCallStatus.FAILED,
        AgentToolCallStatus.REJECTED,
        AgentToolCallStatus.OUTCOME_UNKNOWN,
    }
)
"""Tool call statuses after which the call's tool_call_finished was written."""

_CHECK_NOTES: Final = {
    ToolOutcomeCheckStatus.APPLIED.value: " (confirmed after a restart: the order store has it)",
    ToolOutcomeCheckStatus.NOT_APPLIED.value: (
        " (not applied before the restart: the order store had no trace of it)"
    ),
    ToolOutcomeCheckStatus.UNKNOWN.value: " (outcome unknown after a restart)",
    ToolOutcomeCheckStatus.CHECK_FAILED.value: (
        " (outcome unknown after a restart: its outcome check failed)"
    ),
}
"""What the demo adds to ``tool_call_finished`` when a lost call's outcome check answered."""


async def _read_stdin_line() -> str:
    """One line of stdin, "" at its end, read on a daemon thread.

    A daemon thread, unlike ``asyncio.to_thread``, never holds up the exit after
    Ctrl+C while the prompt waits.
    """
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str] = loop.create_future()

    def deliver(text: str) -> None:
        if not line.done():
            line.set_result(text)

    def read() -> None:
        text = sys.stdin.readline()
        with contextlib.suppress(RuntimeError):  # the loop closed while this thread waited
            loop.call_soon_threadsafe(deliver, text)

    threading.Thread(target=read, name="dex-agents-demo-stdin", daemon=True).start()
    return await line


def _payload_text(payload: dict[str, Any]) -> Callable[[str], str]:
    return lambda name: str(payload.get(name, ""))


def _turn_finished(snapshot: AgentSnapshot) -> bool:
    state = snapshot.state
    return (
        state is not None
        and state.active_turn_id is None
        and state.status == AgentStatus.WAITING_FOR_USER_MESSAGE
    )


def _render_message(message: AgentMessage, checks: Mapping[str, str]) -> str:
    if message.role == MessageRole.TOOL:
        checked = _CHECK_NOTES.get(checks.get(message.tool_call_id or "", ""), "")
        return f"  tool {message.tool_name}: {message.tool_output}{checked}"
    if message.tool_name:
        return f"  {message.role} -> {message.tool_name}({message.tool_arguments or ''})"
    return f"  {message.role}: {message.text or ''}"


def _order_id(text: str) -> str:
    match = re.search(r"\d+", text)
    return match.group(0) if match else "7"
