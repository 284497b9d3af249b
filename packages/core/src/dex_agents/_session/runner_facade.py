"""``RunnerFacade``: every call the session makes into its runner, in one place.

The Flow builds one facade per Flow type. It checks the runner's capabilities once (the optional
protocols ``ToolTaskPoller``, ``ToolTaskCanceller``, ``ContextCompactionRunner``,
``UnfinishedTurnMessageBuilder`` and ``PlanModeRunner``), and each runner call the Steps make goes
through one method here: it runs the call with the Step attempt's background heartbeat, sets the
current deferred tool call where a tool runs, and checks what the runner returned against the
contract, raising ``RunnerContractError`` for a value of the wrong type. What a model call or a
tool returns has each lone surrogate replaced by U+FFFD before the session stores it, and a tool
result over ``MAX_TOOL_RESULT_BYTES`` becomes a ``ToolExecutionError`` (the call records
``failed``). Tracing hangs its spans
on these methods: each model call runs inside its ``chat`` span's ``running()`` (the activation
root current, a failure recorded), and each tool call or task poll inside its ``execute_tool``
span, the current span while the tool runs.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Iterator, Sequence
from typing import Any, Final, TypeVar

from dex_agents._deferred_tool_context import _deferred_tool_execution_scope
from dex_agents._runner_contract import (
    AgentFrameworkRunner,
    AgentTurnContext,
    AgentTurnOutcome,
    ContextCompactionRunner,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolCallsRequested,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskCancellation,
    ToolTaskCanceller,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPoller,
    ToolTaskPollOutcome,
    ToolTaskStarted,
    TurnCompleted,
    UnfinishedTurnMessageBuilder,
    runner_supports_plan_mode,
)
from dex_agents._session.heartbeat import Heartbeat
from dex_agents._session.options import AgentSessionOptions
from dex_agents._session.size_budgets import tool_outcome_problem, tool_text_within_budget
from dex_agents._text_validity import replace_unencodable_values
from dex_agents._tracing.session_tracing import ModelCallSpan, ToolCallSpan
from dex_agents._values import FrameworkMessage, MessageRole
from dex_agents.exceptions import ConfigurationTypeError, RunnerContractError, ToolExecutionError

__all__ = ["RunnerFacade"]

_logger: Final = logging.getLogger("dex_agents.session")

_RUNNER_METHODS: Final = ("build_user_message", "run_model_step", "execute_deferred_tool_call")
_COMPACTION_METHODS: Final = (
    "estimate_input_tokens",
    "select_compaction_cutoff",
    "summarize_context",
)


class RunnerFacade:
    """The session's view of one runner: its capabilities and one method per runner call.

    Args:
        runner: The Flow's ``AgentFrameworkRunner``.

    Raises:
        ConfigurationTypeError: When ``runner`` lacks a method of the runner contract.

    Example:
        >>> from dex_agents.stepwise import AgentDefinition, ScriptedModelClient, ScriptedModelReply
        >>> from dex_agents.stepwise import StepwiseAgentRunner
        >>> model = ScriptedModelClient(lambda request: ScriptedModelReply(text="Hi"))
        >>> facade = RunnerFacade(StepwiseAgentRunner(AgentDefinition("a", "Help.", model)))
        >>> facade.polls_tool_tasks, facade.compacts, facade.supports_plan_mode
        (True, True, True)
    """

    def __init__(self, runner: AgentFrameworkRunner[Any]) -> None:
        for method in _RUNNER_METHODS:
            if not callable(getattr(runner, method, None)):
                raise ConfigurationTypeError(
                    f"runner {type(runner).__name__} has no {method} method: a runner implements "
                    f"AgentFrameworkRunner ({', '.join(_RUNNER_METHODS)})"
                )
        self._runner = runner
        self.polls_tool_tasks: Final = isinstance(runner, ToolTaskPoller)
        """Whether the runner polls the tasks its tools start (``ToolTaskPoller``)."""
        self.cancels_tool_tasks: Final = isinstance(runner, ToolTaskCanceller)
        """Whether the runner cancels abandoned tasks (``ToolTaskCanceller``)."""
        self.compacts: Final = isinstance(runner, ContextCompactionRunner)
        """Whether the runner estimates, cuts and summarizes (``ContextCompactionRunner``)."""
        self.builds_unfinished_turn_messages: Final = isinstance(
            runner, UnfinishedTurnMessageBuilder
        )
        """Whether the runner stores an unfinished turn's transcript."""
        self.supports_plan_mode: Final = runner_supports_plan_mode(runner)
        """Whether the runner declares ``supports_plan_mode = True`` (``PlanModeRunner``)."""

    @property
    def runner(self) -> AgentFrameworkRunner[Any]:
        """The runner itself."""
        return self._runner

    @property
    def name(self) -> str:
        """The runner's class name, for messages."""
        return type(self._runner).__name__

    def require_capabilities(self, options: AgentSessionOptions) -> None:
        """Check that the runner can do what ``options`` ask of it.

        Raises:
            ConfigurationTypeError: When a compaction policy is set for a runner that lacks a
                ``ContextCompactionRunner`` method, or plan mode for a runner that does not set
                ``supports_plan_mode = True``.
        """
        if options.compaction is not None:
            for method in _COMPACTION_METHODS:
                if not callable(getattr(self._runner, method, None)):
                    raise ConfigurationTypeError(
                        f"a compaction policy needs a ContextCompactionRunner, but runner "
                        f"{self.name} has no {method} method; implement "
                        f"{', '.join(_COMPACTION_METHODS)} or set compaction=None"
                    )
        if options.plan_mode_enabled and not self.supports_plan_mode:
            raise ConfigurationTypeError(
                f"plan_mode_enabled needs a PlanModeRunner: runner {self.name} does not set "
                "supports_plan_mode = True; set it on a runner that offers only write_todos in a "
                "planning turn, or set plan_mode_enabled=False"
            )

    def build_user_message(self, text: str) -> FrameworkMessage:
        """The runner's user message for ``text``.

        Raises:
            RunnerContractError: When the runner returns anything but a ``user`` FrameworkMessage.
        """
        return _require_role(self._runner.build_user_message(text), "build_user_message")

    async def run_model_step(
        self, turn: AgentTurnContext, heartbeat: Heartbeat, span: ModelCallSpan
    ) -> AgentTurnOutcome:
        """Make the turn's next model call; ``turn.events`` closes when it returns.

        A failed call ends ``span`` with status ERROR; the Step ends a returned call's span.

        Raises:
            RunnerContractError: When the runner returns neither TurnCompleted nor
                ToolCallsRequested.
        """
        with span.running():
            try:
                async with heartbeat.in_background():
                    outcome: object = await self._runner.run_model_step(turn)
            finally:
                turn.events.close()
            if not isinstance(outcome, TurnCompleted | ToolCallsRequested):
                raise RunnerContractError(
                    "run_model_step must return TurnCompleted or ToolCallsRequested, "
                    f"got {type(outcome).__name__}"
                )
        return replace_unencodable_values(outcome)

    async def execute_deferred_tool_call(
        self, execution: DeferredToolExecution, heartbeat: Heartbeat, span: ToolCallSpan
    ) -> DeferredToolOutcome:
        """Run one tool call as the current deferred tool call, with ``span`` current;
        ``execution.events`` closes when it returns.

        A failure ends ``span`` with status ERROR; the Step ends a returned call's span.

        Raises:
            ToolExecutionError: As the runner raised it, for the model to see.
            RunnerContractError: When the runner returns anything but ToolExecutionResult,
                ToolInputRequested, or ToolTaskStarted.
        """
        with span.running():
            try:
                async with heartbeat.in_background():
                    with _deferred_tool_execution_scope(execution), _storable_tool_errors():
                        outcome: object = await self._runner.execute_deferred_tool_call(execution)
            finally:
                execution.events.close()
            if not isinstance(outcome, ToolExecutionResult | ToolInputRequested | ToolTaskStarted):
                raise RunnerContractError(
                    "execute_deferred_tool_call must return ToolExecutionResult, "
                    f"ToolInputRequested, or ToolTaskStarted, got {type(outcome).__name__}"
                )
            return _storable_tool_outcome(outcome)

    async def poll_tool_task(
        self, poll: ToolTaskPoll, heartbeat: Heartbeat, span: ToolCallSpan
    ) -> ToolTaskPollOutcome:
        """Poll the call's task once, with ``span`` current; a failure ends it with ERROR.

        Raises:
            ToolExecutionError: As the runner raised it, for the model to see.
            RunnerContractError: When the runner is no ToolTaskPoller, or returns anything but
                ToolExecutionResult, ToolTaskPending, or ToolInputRequested.
        """
        runner = self._runner
        if not isinstance(runner, ToolTaskPoller):
            raise RunnerContractError(
                f"tool call {poll.tool_call.tool_call_id} waits for a task, but runner "
                f"{self.name} has no poll_tool_task method"
            )
        with span.running():
            async with heartbeat.in_background():
                with _storable_tool_errors():
                    outcome: object = await runner.poll_tool_task(poll)
            if not isinstance(outcome, ToolExecutionResult | ToolTaskPending | ToolInputRequested):
                raise RunnerContractError(
                    "poll_tool_task must return ToolExecutionResult, ToolTaskPending, or "
                    f"ToolInputRequested, got {type(outcome).__name__}"
                )
            return _storable_tool_outcome(outcome)

    async def cancel_tool_task(
        self, cancellation: ToolTaskCancellation, heartbeat: Heartbeat
    ) -> None:
        """Ask a ``ToolTaskCanceller`` runner to cancel an abandoned task; nothing otherwise."""
        runner = self._runner
        if not isinstance(runner, ToolTaskCanceller):
            return
        async with heartbeat.in_background():
            await runner.cancel_tool_task(cancellation)

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """The runner's estimate of the next model input (the compaction policy checks it)."""
        return self._compaction_runner().estimate_input_tokens(turn)

    async def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> object:
        """The last message to summarize, awaited when the runner returns an awaitable
        (``compaction_through_sequence`` checks it)."""
        cutoff: object = self._compaction_runner().select_compaction_cutoff(
            turn, retained_token_budget
        )
        if inspect.isawaitable(cutoff):
            cutoff = await cutoff
        return cutoff

    async def summarize_context(
        self, request: ContextSummaryRequest, heartbeat: Heartbeat, span: ModelCallSpan
    ) -> ContextSummaryResult:
        """Make the one summary call of a ``CompactContext`` attempt inside its ``chat`` span.

        Raises:
            RunnerContractError: When the runner is no ContextCompactionRunner, or returns
                anything but a ContextSummaryResult with text.
        """
        with span.running():
            runner = self._compaction_runner()
            async with heartbeat.in_background():
                result: object = await runner.summarize_context(request)
            if not isinstance(result, ContextSummaryResult) or not isinstance(result.text, str):
                raise RunnerContractError(
                    "summarize_context must return a ContextSummaryResult with text, got "
                    f"{type(result).__name__}"
                )
        return replace_unencodable_values(result)

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """The runner's messages of an unfinished turn, or none.

        A runner without the method, one that raises, or one that returns anything but
        FrameworkMessage values gives none, with a warning log: the session then stores only its
        note.
        """
        runner = self._runner
        if not isinstance(runner, UnfinishedTurnMessageBuilder):
            return ()
        try:
            messages = tuple(runner.build_unfinished_turn_messages(turn))
        except Exception:
            _logger.warning(
                "build_unfinished_turn_messages failed; storing only the note", exc_info=True
            )
            return ()
        if not all(isinstance(message, FrameworkMessage) for message in messages):
            _logger.warning(
                "build_unfinished_turn_messages returned something other than FrameworkMessage "
                "values; storing only the note"
            )
            return ()
        return replace_unencodable_values(messages)

    def _compaction_runner(self) -> ContextCompactionRunner:
        runner = self._runner
        if not isinstance(runner, ContextCompactionRunner):
            raise RunnerContractError(f"runner {self.name} is not a ContextCompactionRunner")
        return runner


_OutcomeT = TypeVar("_OutcomeT")


def _storable_tool_outcome(outcome: _OutcomeT) -> _OutcomeT:
    """``outcome`` with lone surrogates replaced; a result over the budget raises
    ``ToolExecutionError``, so the call records ``failed`` instead of a value Dex cannot hold."""
    storable = replace_unencodable_values(outcome)
    problem = tool_outcome_problem(storable)
    if problem is not None:
        raise ToolExecutionError(problem)
    return storable


@contextlib.contextmanager
def _storable_tool_errors() -> Iterator[None]:
    """Re-raise a ``ToolExecutionError`` with a message the session can store: lone surrogates
    replaced and cut to ``MAX_TOOL_RESULT_BYTES``."""
    try:
        yield
    except ToolExecutionError as error:
        message = str(error)
        storable = tool_text_within_budget(replace_unencodable_values(message))
        if storable == message:
            raise
        raise ToolExecutionError(storable) from error


def _require_role(message: object, source: str) -> FrameworkMessage:
    if not isinstance(message, FrameworkMessage):
        raise RunnerContractError(
            f"{source} must return a FrameworkMessage, got {type(message).__name__}"
        )
    if message.role is not MessageRole.USER:
        raise RunnerContractError(
            f"{source} must return a message with role {MessageRole.USER.value}, got {message.role}"
        )
    return message
