"""The runner contract: outcome texts, the turn-failure note, contexts, keys, and protocols."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    TOOL_CALL_NOT_RUN_ERROR_PREFIX,
    AgentEventWriter,
    AgentFrameworkRunner,
    AgentMessage,
    AgentToolCall,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    CancellationReason,
    ConfigurationError,
    ContextCompactionRunner,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
    InteractionMode,
    MessageRole,
    PlanModeRunner,
    ResolvedToolPolicy,
    RunnerContractError,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolPolicy,
    ToolTaskCancellation,
    ToolTaskCanceller,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPoller,
    ToolTaskPollOutcome,
    ToolTaskStarted,
    TurnCompleted,
    UnfinishedTurnMessageBuilder,
    build_turn_failure_note,
    describe_tool_call_outcome,
    tool_call_idempotency_key,
)
from dex_agents._runner_contract import (
    runner_supports_plan_mode,
    tool_call_not_run_error,
    validate_tool_calls_requested,
)
from dex_agents.testing import TurnContextBuilder


def _record(
    tool_call_id: str = "call_1",
    status: AgentToolCallStatus = AgentToolCallStatus.SUCCEEDED,
    deferral_order: int = 0,
    **changes: object,
) -> AgentToolCall:
    record = AgentToolCall(
        tool_call_id=tool_call_id,
        tool_name="refund_order",
        arguments='{"order":7}',
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        requires_approval=True,
        status=status,
        turn_id="turn-2",
        deferral_order=deferral_order,
    )
    return dataclasses.replace(record, **changes)  # type: ignore[arg-type]


def _turn(**changes: object) -> AgentTurnContext:
    turn = TurnContextBuilder(flow_id="session-42", turn_number=2).context()
    return dataclasses.replace(turn, **changes)  # type: ignore[arg-type]


# describe_tool_call_outcome


def test_succeeded_renders_the_output() -> None:
    assert describe_tool_call_outcome(_record(output="refunded 5 EUR")) == "refunded 5 EUR"
    assert describe_tool_call_outcome(_record(output=None)) == ""


def test_failed_renders_the_error() -> None:
    record = _record(status=AgentToolCallStatus.FAILED, error="order 7 does not exist")
    assert describe_tool_call_outcome(record) == "Error: order 7 does not exist"
    not_run = _record(status=AgentToolCallStatus.FAILED, error=tool_call_not_run_error("no Worker"))
    assert describe_tool_call_outcome(not_run) == (
        "Error: the tool did not run, so it is safe to call again: no Worker"
    )


def test_outcome_unknown_renders_the_outcome_unknown_text() -> None:
    record = _record(status=AgentToolCallStatus.OUTCOME_UNKNOWN, error="Worker died")
    assert describe_tool_call_outcome(record) == OUTCOME_UNKNOWN_TOOL_RESULT
    assert "may or may not have taken effect" in OUTCOME_UNKNOWN_TOOL_RESULT


def test_rejected_by_a_person_renders_the_reason() -> None:
    rejected = _record(status=AgentToolCallStatus.REJECTED)
    assert describe_tool_call_outcome(rejected) == "The user rejected this tool call."
    with_reason = _record(status=AgentToolCallStatus.REJECTED, rejection_message="too expensive")
    assert describe_tool_call_outcome(with_reason) == (
        "The user rejected this tool call. Reason: too expensive"
    )


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        (
            CancellationReason.STEERED,
            '{"status":"cancelled","reason":"superseded_by_steered_user_message"}',
        ),
        (
            CancellationReason.TURN_CANCELLED,
            '{"status":"cancelled","reason":"turn_cancelled_by_user"}',
        ),
    ],
)
def test_rejected_by_steering_or_cancellation_renders_the_cancelled_json(
    reason: CancellationReason, expected: str
) -> None:
    record = _record(status=AgentToolCallStatus.REJECTED, cancellation_reason=reason)
    assert describe_tool_call_outcome(record) == expected


@pytest.mark.parametrize(
    "status", [status for status in AgentToolCallStatus if not status.is_final]
)
def test_a_waiting_record_has_no_outcome(status: AgentToolCallStatus) -> None:
    with pytest.raises(ConfigurationError, match=f"tool call 'call_1' is still {status.value}"):
        describe_tool_call_outcome(_record(status=status))


# build_turn_failure_note


def test_turn_failure_note_lists_calls_in_deferral_order() -> None:
    records = [
        _record("b", AgentToolCallStatus.OUTCOME_UNKNOWN, deferral_order=2),
        _record("a", AgentToolCallStatus.SUCCEEDED, deferral_order=0, output="refunded"),
        _record(
            "c",
            AgentToolCallStatus.FAILED,
            deferral_order=1,
            tool_name="search",
            arguments="{}",
            error="index offline",
        ),
    ]
    assert build_turn_failure_note(records) == (
        "[Dex] The previous turn failed after these tool calls ran:\n"
        '- refund_order {"order":7} -> succeeded: refunded\n'
        "- search {} -> failed: Error: index offline\n"
        '- refund_order {"order":7} -> outcome_unknown: ' + OUTCOME_UNKNOWN_TOOL_RESULT + "\n"
        "Do not repeat these tool calls unless the user asks again."
    )


def test_turn_failure_note_needs_final_records() -> None:
    with pytest.raises(ConfigurationError, match="at least one tool call record"):
        build_turn_failure_note([])
    with pytest.raises(ConfigurationError, match="still awaiting_approval"):
        build_turn_failure_note([_record(status=AgentToolCallStatus.AWAITING_APPROVAL)])


def test_not_run_error_prefix() -> None:
    assert TOOL_CALL_NOT_RUN_ERROR_PREFIX == "the tool did not run, so it is safe to call again"
    assert tool_call_not_run_error("detail").startswith(TOOL_CALL_NOT_RUN_ERROR_PREFIX + ": ")


# Turn context


def test_turn_context_defaults_are_safe() -> None:
    turn = _turn()
    assert turn.is_resuming is False
    assert turn.interaction_mode is InteractionMode.CHAT
    assert turn.session_settings == {}
    assert turn.enabled_built_in_tools == frozenset()
    assert turn.plan is None
    assert turn.context_summary is None
    assert turn.recorded_tool_call("missing") is None


def test_turn_context_orders_records_and_reads_them_by_id() -> None:
    later = _record("later", deferral_order=1)
    first = _record("first", deferral_order=0)
    turn = _turn(tool_calls={"later": later, "first": first}, framework_run_state="state")
    assert list(turn.tool_calls) == ["first", "later"]
    assert turn.recorded_tool_call("later") == later
    assert turn.is_resuming is True
    with pytest.raises(TypeError):
        turn.tool_calls["new"] = first  # type: ignore[index]


def test_turn_context_resolves_policies_with_its_options() -> None:
    turn = _turn(
        tool_policies={"search": ToolPolicy(ToolEffect.READ)},
        default_tool_effect=ToolEffect.IDEMPOTENT_WRITE,
    )
    assert turn.resolve_tool_policy("search", ToolEffect.NON_IDEMPOTENT_WRITE) == (
        ResolvedToolPolicy(ToolEffect.READ, False)
    )
    assert turn.resolve_tool_policy("mcp_read", ToolEffect.READ).effect is ToolEffect.READ
    assert turn.resolve_tool_policy("other") == ResolvedToolPolicy(
        ToolEffect.IDEMPOTENT_WRITE, False
    )


async def test_turn_context_heartbeat_calls_the_session() -> None:
    beats: list[str] = []

    async def beat() -> None:
        beats.append("beat")

    await _turn(send_heartbeat=beat).heartbeat()
    await _turn().heartbeat()  # a hand-built context heartbeats into nothing
    assert beats == ["beat"]


# Tool executions


def test_idempotency_key_is_stable_and_includes_the_turn() -> None:
    record = _record("call_9")
    events = AgentEventWriter.discarding()
    first = DeferredToolExecution("session-42", record, 1, events)
    retry = DeferredToolExecution("session-42", record, 3, events)
    assert first.idempotency_key == retry.idempotency_key == "session-42/turn-2/call_9"
    later_turn = DeferredToolExecution("session-42", _record("call_9", turn_id="turn-5"), 1, events)
    assert later_turn.idempotency_key == "session-42/turn-5/call_9"
    assert ToolTaskPoll("session-42", record, 1, events).idempotency_key == first.idempotency_key
    assert ToolTaskCancellation("session-42", record, 2).idempotency_key == first.idempotency_key
    assert tool_call_idempotency_key("f", "turn-1", "c") == "f/turn-1/c"


async def test_heartbeat_checkpoint_is_saved_through_the_session() -> None:
    saved: list[str] = []

    async def save(checkpoint: str) -> None:
        saved.append(checkpoint)

    execution = DeferredToolExecution(
        "session-42", _record(), 1, AgentEventWriter.discarding(), send_checkpoint=save
    )
    assert execution.heartbeat_checkpoint is None
    await execution.save_heartbeat_checkpoint("job-1")
    assert saved == ["job-1"]
    with pytest.raises(RunnerContractError, match="heartbeat checkpoint must be a string"):
        await execution.save_heartbeat_checkpoint(7)  # type: ignore[arg-type]
    resumed = dataclasses.replace(execution, attempt=2, heartbeat_checkpoint="job-1")
    assert resumed.heartbeat_checkpoint == "job-1"


def test_tool_results_validate_their_input() -> None:
    with pytest.raises(ConfigurationError, match="question must not be blank"):
        ToolInputRequested("  ")
    with pytest.raises(ConfigurationError, match="task_id must not be blank"):
        ToolTaskStarted("", 5)
    for interval in (0, -1, float("nan"), True):
        with pytest.raises(
            ConfigurationError, match="poll_interval_seconds must be a positive number"
        ):
            ToolTaskStarted("job", interval)
        with pytest.raises(
            ConfigurationError, match="poll_interval_seconds must be a positive number"
        ):
            ToolTaskPending(interval)
    question = ToolInputRequested("Ship?", choices=["yes", "no"])  # type: ignore[arg-type]
    assert question.choices == ("yes", "no")
    assert question.allows_free_text is True
    assert question.continuation is None


def test_outcomes_keep_sequences_as_tuples() -> None:
    message = FrameworkMessage(MessageRole.ASSISTANT, "{}", text="done")
    completed = TurnCompleted(new_messages=[message], usage=AgentUsage())  # type: ignore[arg-type]
    assert completed.new_messages == (message,)
    call = DeferredToolCall("c1", "t", "{}", ResolvedToolPolicy(ToolEffect.READ, False))
    requested = ToolCallsRequested("state", [call], AgentUsage())  # type: ignore[arg-type]
    assert requested.tool_calls == (call,)
    assert requested.new_messages == ()
    assert requested.model_call_metadata is None


# validate_tool_calls_requested


def _requested(*call_ids: str, run_state: str = "state") -> ToolCallsRequested:
    policy = ResolvedToolPolicy(ToolEffect.READ, False)
    calls = tuple(DeferredToolCall(call_id, "search", "{}", policy) for call_id in call_ids)
    return ToolCallsRequested(run_state, calls, AgentUsage())


def test_valid_tool_calls_pass() -> None:
    validate_tool_calls_requested(_requested("a", "b"), _turn(tool_calls={"z": _record("z")}))


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        (_requested("a", run_state=""), "framework_run_state must be a non-empty string"),
        (_requested(), "at least one tool call"),
        (_requested(""), "must be a non-empty string"),
        (_requested("a/b"), "tool call ID 'a/b' of tool 'search' must not contain '/'"),
        (_requested("a", "a"), "tool call ID 'a' repeats within one model response"),
        (_requested("old"), "tool call ID 'old' already has a record in turn-2"),
    ],
)
def test_invalid_tool_calls_are_named(outcome: ToolCallsRequested, message: str) -> None:
    with pytest.raises(RunnerContractError, match=message):
        validate_tool_calls_requested(outcome, _turn(tool_calls={"old": _record("old")}))


def test_tool_name_and_arguments_are_checked() -> None:
    policy = ResolvedToolPolicy(ToolEffect.READ, False)
    nameless = DeferredToolCall("a", "", "{}", policy)
    with pytest.raises(RunnerContractError, match="tool call 'a' needs a non-empty tool name"):
        validate_tool_calls_requested(ToolCallsRequested("s", (nameless,), AgentUsage()), _turn())
    parsed = DeferredToolCall("a", "t", {"q": 1}, policy)  # type: ignore[arg-type]
    with pytest.raises(RunnerContractError, match="arguments as JSON text"):
        validate_tool_calls_requested(ToolCallsRequested("s", (parsed,), AgentUsage()), _turn())


def test_policy_must_come_from_resolve_tool_policy() -> None:
    call = DeferredToolCall("a", "t", "{}", ToolPolicy(ToolEffect.READ))  # type: ignore[arg-type]
    with pytest.raises(RunnerContractError, match="needs a ResolvedToolPolicy"):
        validate_tool_calls_requested(ToolCallsRequested("s", (call,), AgentUsage()), _turn())


# Protocols


class EchoRunner:
    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(MessageRole.USER, f'{{"content":"{text}"}}', text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        last = turn.messages[-1].text or ""
        turn.events.write_text_delta(last)
        reply = FrameworkMessage(MessageRole.ASSISTANT, "{}", text=last)
        return TurnCompleted(new_messages=(reply,), usage=AgentUsage())

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        raise ToolExecutionError("this agent has no tools")


class TaskRunner(EchoRunner):
    supports_plan_mode = True

    async def execute_deferred_tool_call(  # type: ignore[override]
        self, call: DeferredToolExecution
    ) -> DeferredToolOutcome:
        if call.heartbeat_checkpoint is not None:
            return ToolTaskStarted(call.heartbeat_checkpoint, 5)
        await call.save_heartbeat_checkpoint("job-1")
        return ToolTaskStarted("job-1", 5)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return ToolExecutionResult(f"done {poll.tool_call.task_id}")

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        return None

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        return ()

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        return len(turn.messages)

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        return None

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        return ContextSummaryResult("summary", AgentUsage())


def _session_accepts(runner: AgentFrameworkRunner[DeferredToolOutcome]) -> bool:
    return isinstance(runner, AgentFrameworkRunner)


def test_runners_satisfy_the_protocols() -> None:
    echo, task = EchoRunner(), TaskRunner()
    # A bare runner (results only) is accepted where the session takes any tool outcome.
    assert _session_accepts(echo)
    assert _session_accepts(task)
    for protocol in (
        UnfinishedTurnMessageBuilder,
        ToolTaskPoller,
        ToolTaskCanceller,
        ContextCompactionRunner,
        PlanModeRunner,
    ):
        assert not isinstance(echo, protocol), protocol
        assert isinstance(task, protocol), protocol
    assert runner_supports_plan_mode(task) is True
    assert runner_supports_plan_mode(echo) is False


async def test_echo_runner_runs_against_a_hand_built_context() -> None:
    runner = EchoRunner()
    user = runner.build_user_message("hello")
    stored = AgentMessage.from_framework_message(
        user, sequence=1, turn_id="turn-1", created_at=None
    )
    events: list[str] = []
    writer = AgentEventWriter(
        lambda event: events.append(event.payload),
        turn_id="turn-1",
        step_execution_id="RunModel-1",
        attempt=1,
    )
    outcome = await runner.run_model_step(_turn(messages=(stored,), events=writer))
    assert isinstance(outcome, TurnCompleted)
    assert outcome.new_messages[0].text == "hello"
    assert events == ['{"text":"hello"}']
    with pytest.raises(ToolExecutionError, match="no tools"):
        await runner.execute_deferred_tool_call(
            DeferredToolExecution("s", _record(), 1, AgentEventWriter.discarding())
        )


async def test_task_runner_resumes_from_its_checkpoint() -> None:
    runner = TaskRunner()
    saved: list[str] = []

    async def save(checkpoint: str) -> None:
        saved.append(checkpoint)

    first = DeferredToolExecution(
        "s", _record(), 1, AgentEventWriter.discarding(), send_checkpoint=save
    )
    assert await runner.execute_deferred_tool_call(first) == ToolTaskStarted("job-1", 5)
    assert saved == ["job-1"]
    retry = dataclasses.replace(first, attempt=2, heartbeat_checkpoint="job-1")
    assert await runner.execute_deferred_tool_call(retry) == ToolTaskStarted("job-1", 5)
    assert saved == ["job-1"]
