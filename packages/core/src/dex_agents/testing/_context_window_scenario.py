"""``ContextWindowSessionScenario``: one long session run past a small context window, any runner.

The scenario drives one session for many turns through a private engine and an in-process Worker,
with a compaction policy whose window the conversation outgrows many times over and a small
``retained_message_limit``. The runner under test comes from a factory that wires the scenario's
scripted model (:class:`ContextWindowModel`) into the runner's own framework, the way a test of an
adapter replaces the real model. Every few turns the scenario checks, and at the end it returns a
:class:`ContextWindowReport` whose :meth:`~ContextWindowReport.check` raises ``AssertionError``
when:

- the session compacted fewer than three times, or a model call's input (as the runner's model
  measured it) reached the context window;
- a summary separated a tool call from its result (in the stored transcript, or as a missing result
  in a model input);
- retention deleted messages at fewer than three points (so it never proved it keeps deleting),
  or Flow state kept growing after retention started deleting messages.

Example:
    >>> import asyncio
    >>> scenario = ContextWindowSessionScenario(turns=800, retained_message_limit=100)
    >>> report = asyncio.run(  # doctest: +SKIP
    ...     scenario.run(build_stepwise_context_window_flow, tmp_path))
    >>> report.check()  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, ClassVar, Final

from dex_agents._compaction import CONTEXT_SUMMARY_INSTRUCTIONS, CompactionPolicy
from dex_agents._runner_contract import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents._session.client import AgentSessionClient
from dex_agents._session.flow import AgentSessionFlow
from dex_agents._session.options import AgentSessionOptions
from dex_agents._session.persistence import AGENT_STATE
from dex_agents._tool_policy import ToolEffect
from dex_agents._values import (
    AgentMessage,
    AgentSnapshot,
    AgentState,
    MessageRole,
)
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ModelToolResult,
    ModelUserText,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    function_tool,
    stepwise_agent_session_flow,
)
from dex_agents.testing._engine_process import EngineLogs, EngineProcess
from dex_agents.testing._flow_attributes import read_flow_attributes
from dex_agents.testing._in_process_worker import in_process_worker
from dex_agents.testing._message_pages import read_agent_messages
from dex_agents.testing._waiting import turns_have_ended, wait_until

__all__ = [
    "CONTEXT_WINDOW_TOOL_NAME",
    "ContextWindowModel",
    "ContextWindowProgress",
    "ContextWindowReply",
    "ContextWindowReport",
    "ContextWindowRunnerFactory",
    "ContextWindowSessionScenario",
    "build_stepwise_context_window_flow",
]

CONTEXT_WINDOW_TOOL_NAME: Final = "lookup_note"
"""The one tool of the scenario agent: a read that returns a short note."""
_SESSION_ID: Final = "context-window-session"


@dataclass(frozen=True)
class ContextWindowReply:
    """What the scripted model answers: text, or one call of :data:`CONTEXT_WINDOW_TOOL_NAME`.

    Attributes:
        text: The visible answer; ``None`` when the reply is a tool call.
        tool_argument: The tool call's ``topic`` argument; ``None`` for a text answer.
    """

    text: str | None = None
    tool_argument: str | None = None


@dataclass
class ContextWindowModel:
    """The scripted model of the scenario: what it answers, and what it observed.

    The runner factory wires it into the runner: every model call asks :meth:`respond`, every
    summary call asks :meth:`summarize`, and the tool runs :meth:`run_tool`. Every ``tool_turn_every``
    turns the user asks for notes, and the model calls the tool ``tool_calls_per_turn`` times, one
    call per model response, before it answers, so compaction can happen inside a turn.

    Attributes:
        policy: The compaction policy the factory puts into the session options.
        reply_bytes: Size of each text answer.
        tool_turn_every: Every n-th turn calls the tool.
        tool_calls_per_turn: Model responses with a tool call in such a turn.
        max_input_tokens: The largest model input the runner's model measured (no summary calls).
        model_calls: Model calls made, summary calls excluded.
        summary_calls: Summary calls made.
        missing_results: Tool results seen in an input that read as outcome unknown, which happens
            when a cut separated a call from its result.
    """

    tool_name: ClassVar[str] = CONTEXT_WINDOW_TOOL_NAME
    """The one tool every runner's agent offers: ``tool_name(topic: str)``, which runs
    :meth:`run_tool`."""
    tool_description: ClassVar[str] = "Look up a short note."
    instructions: ClassVar[str] = "You answer questions about topics; look up notes when asked."
    """The agent's instructions."""
    flow_type: ClassVar[str] = "ContextWindowAgent"
    """The agent's Flow type, the same under every runner."""

    policy: CompactionPolicy
    reply_bytes: int = 120
    tool_turn_every: int = 10
    tool_calls_per_turn: int = 2
    max_input_tokens: int = 0
    model_calls: int = 0
    summary_calls: int = 0
    missing_results: int = 0

    def user_text(self, turn: int) -> str:
        """The user message of turn ``turn`` (from 1)."""
        if turn % self.tool_turn_every == 0:
            return f"Turn {turn}: please look up {self.tool_calls_per_turn} notes, then answer."
        return f"Turn {turn}: tell me something new about topic {turn}."

    def respond(
        self, user_text: str, tool_results: Sequence[str], input_tokens: int
    ) -> ContextWindowReply:
        """Answer one model call: ``user_text`` is the turn's user message, ``tool_results`` the
        results of this turn so far, ``input_tokens`` the call's measured input.

        Deterministic, so a rerun after a crash answers the same.
        """
        self.model_calls += 1
        self.max_input_tokens = max(self.max_input_tokens, input_tokens)
        self.missing_results += sum(
            result == OUTCOME_UNKNOWN_TOOL_RESULT for result in tool_results
        )
        if "look up" in user_text and len(tool_results) < self.tool_calls_per_turn:
            return ContextWindowReply(tool_argument=f"note {len(tool_results) + 1}")
        prefix = f"Answer to '{user_text[:40]}' after {len(tool_results)} notes. "
        return ContextWindowReply(text=(prefix + "x" * self.reply_bytes)[: self.reply_bytes])

    def summarize(self, tool_results: Sequence[str]) -> str:
        """Answer one summary call with a short summary."""
        self.summary_calls += 1
        self.missing_results += sum(
            result == OUTCOME_UNKNOWN_TOOL_RESULT for result in tool_results
        )
        return f"Summary {self.summary_calls}: the user asked about many topics."

    @staticmethod
    def run_tool(topic: str) -> str:
        """The tool's result for ``topic``."""
        return f"The note about {topic} says hello."


ContextWindowRunnerFactory = Callable[[ContextWindowModel, AgentSessionOptions], AgentSessionFlow]
"""Builds the session Flow of the runner under test around the scenario's model.

It receives the model and the session options to use (compaction, storage, the tool's ``read``
policy) and returns an ``AgentSessionFlow`` of any Flow type.
"""


@dataclass(frozen=True)
class ContextWindowProgress:
    """One sample taken after a batch of turns.

    Attributes:
        turns: Turns completed so far.
        elapsed_seconds: Wall time since the session started.
        state_bytes: Bytes of every stored Attribute of the session.
        kept_messages: Messages stored (not deleted by retention).
        deleted_before_sequence: Where deleted messages end, once retention deleted any.
        summary_generation: The latest ``ContextSummary.generation``, 0 before any.
    """

    turns: int
    elapsed_seconds: float
    state_bytes: int
    kept_messages: int
    deleted_before_sequence: int | None
    summary_generation: int


@dataclass
class ContextWindowReport:
    """What a scenario run observed; :meth:`check` turns it into assertions.

    Attributes:
        min_summaries: Summaries the session must have made (it compacted several times).
        min_retention_points: Distinct ends of the deleted messages the samples must show, so
            retention kept deleting and the bounded-state check compares samples across several
            deletions.
        state_growth_tolerance: How much larger than the first retained sample a later one may be.
    """

    turns: int
    context_window_tokens: int
    model: ContextWindowModel
    progress: list[ContextWindowProgress] = field(default_factory=list)
    separated_calls: list[str] = field(default_factory=list)
    last_turn_error: str | None = None
    min_summaries: int = 3
    min_retention_points: int = 3
    state_growth_tolerance: float = 0.5

    @property
    def elapsed_seconds(self) -> float:
        """Wall time of the whole session."""
        return self.progress[-1].elapsed_seconds if self.progress else 0.0

    @property
    def retained_state_bytes(self) -> list[int]:
        """State sizes sampled after retention first deleted messages."""
        return [p.state_bytes for p in self.progress if p.deleted_before_sequence is not None]

    def check(self) -> None:
        """Assert the scenario's expectations.

        Raises:
            AssertionError: Naming the first expectation that failed.
        """
        last = self.progress[-1] if self.progress else None
        assert last is not None and last.turns == self.turns, "the session did not finish"
        assert self.last_turn_error is None, f"a turn failed: {self.last_turn_error}"
        assert last.summary_generation >= self.min_summaries, (
            f"the session compacted {last.summary_generation} times, fewer than "
            f"{self.min_summaries}: run more turns"
        )
        assert self.model.summary_calls >= last.summary_generation, "summaries without a call"
        assert self.model.max_input_tokens < self.context_window_tokens, (
            f"a model input reached {self.model.max_input_tokens} tokens, over the window of "
            f"{self.context_window_tokens}"
        )
        assert not self.separated_calls, (
            f"a summary separated tool calls from their results: {self.separated_calls}"
        )
        assert self.model.missing_results == 0, (
            f"{self.model.missing_results} tool results were missing from model inputs"
        )
        retained = self.retained_state_bytes
        assert retained, "retention never deleted a message"
        points = {p.deleted_before_sequence for p in self.progress} - {None}
        assert len(points) >= self.min_retention_points, (
            f"retention deleted messages up to {len(points)} distinct points, fewer than "
            f"{self.min_retention_points}: run more turns, or sample more often"
        )
        limit = retained[0] * (1 + self.state_growth_tolerance)
        assert max(retained) <= limit, (
            f"Flow state grew after retention started: {retained[0]} bytes, then up to "
            f"{max(retained)} bytes"
        )


@dataclass(frozen=True)
class ContextWindowSessionScenario:
    """The same long session, run past a small context window, for any runner.

    Attributes:
        turns: Turns to run (800 for the default guard, a runner's
            ``ScenarioRunner.context_window_guard_turns`` when it is slower; 2,000 for the long
            run).
        retained_message_limit: The retention limit of the session (100 for the guard).
        context_window_tokens: The compaction policy's window.
        batch_turns: Turns queued at once between checks and samples.
        message_window_size: The window of stored messages (the default 64).
        message_chunk_size: Messages per chunk (the default 32).
        turn_timeout_seconds: How long one batch may take per turn before the run fails.
        tool_turn_every: Every n-th turn calls the tool (``ContextWindowModel.tool_turn_every``);
            a short session calls it more often, so it still sees as many tool turns.

    Example:
        See the module documentation.
    """

    turns: int = 800
    retained_message_limit: int | None = 100
    context_window_tokens: int = 4_000
    batch_turns: int = 50
    message_window_size: int = 64
    message_chunk_size: int = 32
    turn_timeout_seconds: float = 2.0
    tool_turn_every: int = 10

    def session_options(self, policy: CompactionPolicy) -> AgentSessionOptions:
        """The options the runner factory receives."""
        return AgentSessionOptions(
            compaction=policy,
            retained_message_limit=self.retained_message_limit,
            message_window_size=self.message_window_size,
            message_chunk_size=self.message_chunk_size,
            tool_policies={},
            default_tool_effect=ToolEffect.READ,
        )

    async def run(
        self,
        factory: ContextWindowRunnerFactory,
        directory: Path,
        *,
        on_progress: Callable[[ContextWindowProgress], None] | None = None,
    ) -> ContextWindowReport:
        """Run the session with the runner ``factory`` builds, in a private engine in
        ``directory``, and return what it observed.

        Raises:
            WaitTimeoutError: When a batch of turns does not finish in time.
            EngineStartError: When the engine does not start.
        """
        model = ContextWindowModel(
            CompactionPolicy(context_window_tokens=self.context_window_tokens),
            tool_turn_every=self.tool_turn_every,
        )
        flow = factory(model, self.session_options(model.policy))
        report = ContextWindowReport(self.turns, self.context_window_tokens, model)
        engine = await EngineProcess.start_local(
            directory / "engine.db", EngineLogs.in_directory(directory), warm_start=True
        )
        try:
            await self._drive(engine.server_address, directory, flow, model, report, on_progress)
        finally:
            await engine.stop()
        return report

    async def _drive(
        self,
        server_address: str,
        directory: Path,
        flow: AgentSessionFlow,
        model: ContextWindowModel,
        report: ContextWindowReport,
        on_progress: Callable[[ContextWindowProgress], None] | None,
    ) -> None:
        async with in_process_worker([flow], server_address, directory / "blob-cache") as dex:
            sessions = dex.sessions(flow)
            started = time.monotonic()
            done = 0
            while done < self.turns:
                target = min(done + self.batch_turns, self.turns)
                await self._queue_turns(sessions, model, done + 1, target)
                await wait_until(
                    f"{target} turns to finish",
                    functools.partial(_idle_after_turns, server_address, target),
                    timeout=self.turn_timeout_seconds * (target - done) + 30,
                )
                snapshot = await sessions.get_agent_snapshot(_SESSION_ID)
                done = target
                progress = await self._sample(server_address, sessions, snapshot, report, started)
                report.progress.append(progress)
                if on_progress is not None:
                    on_progress(progress)

    @staticmethod
    async def _queue_turns(
        sessions: AgentSessionClient, model: ContextWindowModel, first: int, last: int
    ) -> None:
        # Queued messages start one turn each, back to back, with no Client round trip between.
        for turn in range(first, last + 1):
            text = model.user_text(turn)
            if turn == 1:
                await sessions.start_session(_SESSION_ID, text)
            else:
                await sessions.send_user_message(_SESSION_ID, text)

    @staticmethod
    async def _sample(
        server_address: str,
        sessions: AgentSessionClient,
        snapshot: AgentSnapshot,
        report: ContextWindowReport,
        started: float,
    ) -> ContextWindowProgress:
        state = snapshot.state
        assert state is not None
        if state.last_turn_error is not None and report.last_turn_error is None:
            report.last_turn_error = state.last_turn_error
        summary = snapshot.context_summary
        kept = await read_agent_messages(sessions, _SESSION_ID)
        if summary is not None:
            report.separated_calls.extend(_separated_calls(kept, summary.last_sequence))
        attributes = await read_flow_attributes(server_address, _SESSION_ID)
        return ContextWindowProgress(
            turns=state.turn_count,
            elapsed_seconds=time.monotonic() - started,
            state_bytes=attributes.total_bytes,
            kept_messages=len(kept),
            deleted_before_sequence=snapshot.deleted_before_sequence,
            summary_generation=summary.generation if summary is not None else 0,
        )


def build_stepwise_context_window_flow(
    model: ContextWindowModel, options: AgentSessionOptions
) -> AgentSessionFlow:
    """The scenario agent as a Stepwise agent whose ScriptedModelClient asks ``model``.

    Example:
        >>> model = ContextWindowModel(CompactionPolicy(context_window_tokens=4_000))
        >>> flow = build_stepwise_context_window_flow(model, AgentSessionOptions(compaction=model.policy))
        >>> flow.get_flow_type(), flow.options.compaction is model.policy
        ('ContextWindowAgent', True)
    """

    @function_tool(effect=ToolEffect.READ, name=CONTEXT_WINDOW_TOOL_NAME)
    async def lookup_note(topic: Annotated[str, "What the note is about"]) -> str:
        """Look up a short note."""
        return ContextWindowModel.run_tool(topic)

    client: ScriptedModelClient

    def respond(request: ModelRequest) -> ScriptedModelReply:
        results = [item.output for item in request.input if isinstance(item, ModelToolResult)]
        if request.instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
            return ScriptedModelReply(text=model.summarize(results))
        last_user = max(
            (i for i, item in enumerate(request.input) if isinstance(item, ModelUserText)),
            default=-1,
        )
        turn_results = [
            item.output
            for item in request.input[last_user + 1 :]
            if isinstance(item, ModelToolResult)
        ]
        user_text = ScriptedModelClient.user_texts(request)[-1]
        reply = model.respond(user_text, turn_results, client.estimate_input_tokens(request))
        if reply.tool_argument is not None:
            return ScriptedModelReply(
                tool_calls=[
                    ScriptedToolCall(CONTEXT_WINDOW_TOOL_NAME, {"topic": reply.tool_argument})
                ]
            )
        return ScriptedModelReply(text=reply.text)

    client = ScriptedModelClient(respond, max_recorded_requests=0)
    definition = AgentDefinition(
        name="context-window",
        instructions=ContextWindowModel.instructions,
        model=client,
        tools=[lookup_note],
        compaction=options.compaction,
    )
    return stepwise_agent_session_flow(
        definition, flow_type=ContextWindowModel.flow_type, options=options
    )


async def _idle_after_turns(server_address: str, turns: int) -> bool:
    # Reads AGENT_STATE from the engine alone, so polling costs the Worker nothing.
    attributes = await read_flow_attributes(server_address, _SESSION_ID, [AGENT_STATE.name])
    stored = attributes.json_of(AGENT_STATE.name)
    if not isinstance(stored, dict):
        return False
    return turns_have_ended(AgentState.from_json(stored), turns)


def _separated_calls(messages: Sequence[AgentMessage], last_summarized: int) -> list[str]:
    calls = {
        m.tool_call_id: m.sequence
        for m in messages
        if m.role is MessageRole.ASSISTANT and m.tool_call_id
    }
    results = {m.tool_call_id: m.sequence for m in messages if m.role is MessageRole.TOOL}
    return sorted(
        call_id
        for call_id, sequence in calls.items()
        if sequence <= last_summarized < results.get(call_id, sequence)
    )
