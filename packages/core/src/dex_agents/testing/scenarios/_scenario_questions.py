"""Runner-neutral behaviour of the scenario tools that ask the user or start a remote task.

``confirm`` asks ``Ship it?`` before it takes any effect and, after the answer, answers with it.
``report`` starts a remote job (a JSON file in the state directory, so it outlives a killed
Worker), and each poll reads it: first still running, then a question ``Include drafts?``, then,
once the answer reached the job, the finished report. A runner maps ``ScenarioQuestion`` to its
``ToolInputRequested`` and ``ScenarioTaskStep`` values to ``ToolTaskStarted``/``ToolTaskPending``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dex_agents import (
    DeferredToolExecution,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)
from dex_agents.testing._file_gate import FileGate
from dex_agents.testing.scenarios._scenario_agent import ScenarioAgentSpec, scenario_session

CONFIRM_TOOL = "confirm"
"""The tool that asks ``CONFIRM_QUESTION`` before it takes any effect (``tool_questions``)."""
REPORT_TOOL = "report"
"""The tool that starts a report job, a tool task the session polls (``tool_tasks``)."""
REPORT_POLL_INVOCATION = "report-poll"
"""The ``InvocationLog`` name of one poll of a report job."""
CONFIRM_QUESTION = "Ship it?"
"""The question the ``confirm`` tool asks."""
CONFIRM_CHOICES = ("yes", "no")
"""The answers the ``confirm`` tool's question allows."""
REPORT_QUESTION = "Include drafts?"
"""The question a report job asks while it runs."""
REPORT_QUESTION_ID = "drafts-question"
"""The job's own key of ``REPORT_QUESTION``, kept in the poll's continuation."""
REPORT_POLL_INTERVAL_SECONDS = 1
"""Seconds between two polls of a report job."""
_CHECKPOINT_SEND_SECONDS = 0.2


@dataclass(frozen=True)
class ScenarioQuestion:
    """A question a scenario tool or task asks before it goes on."""

    question: str
    choices: tuple[str, ...] = ()
    allows_free_text: bool = True
    continuation: str | None = None

    def payload(self) -> dict[str, object]:
        """The question as the JSON value a framework's own interrupt carries (LangGraph's
        ``interrupt()`` value, a Strands interrupt's reason), which its runner reads back.

        Example:
            >>> ScenarioQuestion("Ship it?", ("yes", "no"), allows_free_text=False).payload()
            {'question': 'Ship it?', 'choices': ['yes', 'no'], 'allows_free_text': False}
        """
        return {
            "question": self.question,
            "choices": list(self.choices),
            "allows_free_text": self.allows_free_text,
        }


@dataclass(frozen=True)
class ScenarioTaskRunning:
    """The job still runs: poll again after ``poll_interval_seconds``."""

    poll_interval_seconds: int = REPORT_POLL_INTERVAL_SECONDS
    continuation: str | None = None


def run_confirm_tool(
    spec: ScenarioAgentSpec, answers: Sequence[str | None], idempotency_key: str
) -> str | ScenarioQuestion:
    """Ask before any effect; with an answer, log the one real effect and report it."""
    if not answers:
        return ScenarioQuestion(CONFIRM_QUESTION, CONFIRM_CHOICES, allows_free_text=False)
    spec.invocation_log.record(CONFIRM_TOOL, key=idempotency_key)
    return f"confirmed: {answers[-1]}"


def confirm_by_asking(
    spec: ScenarioAgentSpec,
    idempotency_key: str,
    ask: Callable[[ScenarioQuestion, int], str | None],
) -> str:
    """The body of ``confirm`` for a framework whose tool asks in place: each question goes to
    ``ask`` (with its number, from 1), the framework's own interrupt, which stops the first run and
    returns the person's answer when the tool runs again; then the one write.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> spec = ScenarioAgentSpec("Doc", Path(tempfile.mkdtemp()))
        >>> confirm_by_asking(spec, "key-1", lambda question, number: "yes")
        'confirmed: yes'
    """
    answers: list[str | None] = []
    while isinstance(result := run_confirm_tool(spec, answers, idempotency_key), ScenarioQuestion):
        answers.append(ask(result, len(answers) + 1))
    return result


def start_report(spec: ScenarioAgentSpec, idempotency_key: str) -> str:
    """Start the job of ``idempotency_key`` (the remote system drops a duplicate); its task ID."""
    spec.invocation_log.record(REPORT_TOOL, key=idempotency_key)
    job_id = "job-" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:12]
    path = _job_path(spec.state_dir, job_id)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_job(path, {"polls": 0, "answer": None, "deliveries": 0})
    return job_id


async def stop_at_report_gate(spec: ScenarioAgentSpec, gate: str) -> None:
    """Stop at ``gate`` (when not empty) after the job's handle is saved, so a test can kill the
    Worker between the start and the tool Step's commit."""
    if gate:
        # The Dex SDK's heartbeat() only queues the checkpoint's frame, and Dex may drop a
        # checkpoint that never left the Worker (the runner contract allows it). A test that
        # kills the Worker at this gate means "after the checkpoint reached Dex", so give the
        # frame time to leave before the gate says so.
        await asyncio.sleep(_CHECKPOINT_SEND_SECONDS)
        file_gate = FileGate(spec.state_dir, gate)
        file_gate.mark_reached()
        await file_gate.wait_for_release()


def poll_report(
    spec: ScenarioAgentSpec,
    job_id: str,
    *,
    continuation: str | None,
    pending_answer: str | None,
    answer_is_pending: bool,
) -> str | ScenarioQuestion | ScenarioTaskRunning:
    """Poll the job once; deliver a pending answer idempotently, keyed by the question ID."""
    spec.invocation_log.record(REPORT_POLL_INVOCATION, key=job_id)
    path = _job_path(spec.state_dir, job_id)
    job = json.loads(path.read_text())
    job["polls"] += 1
    if answer_is_pending and continuation == REPORT_QUESTION_ID and job["answer"] is None:
        job["answer"] = pending_answer if pending_answer is not None else "(declined)"
        job["deliveries"] += 1
    _write_job(path, job)
    if job["answer"] is not None:
        if answer_is_pending:
            return ScenarioTaskRunning(continuation=REPORT_QUESTION_ID)
        return f"report ready (drafts: {job['answer']})"
    if job["polls"] == 1:
        return ScenarioTaskRunning()
    return ScenarioQuestion(REPORT_QUESTION, continuation=REPORT_QUESTION_ID)


def scenario_input_requested(question: ScenarioQuestion) -> ToolInputRequested:
    """The runner contract's ``ToolInputRequested`` for a scenario question."""
    return ToolInputRequested(
        question.question,
        choices=question.choices,
        allows_free_text=question.allows_free_text,
        continuation=question.continuation,
    )


async def start_report_task(
    spec: ScenarioAgentSpec, call: DeferredToolExecution, gate: str
) -> ToolTaskStarted:
    """The body of the ``report`` tool in a tool Step: start the job once, saving its handle as the
    heartbeat checkpoint, so a retried attempt resumes the saved job instead of starting another."""
    if call.heartbeat_checkpoint is not None:
        return ToolTaskStarted(call.heartbeat_checkpoint, REPORT_POLL_INTERVAL_SECONDS)
    job_id = start_report(spec, call.idempotency_key)
    await call.save_heartbeat_checkpoint(job_id)
    await stop_at_report_gate(spec, gate)
    return ToolTaskStarted(job_id, REPORT_POLL_INTERVAL_SECONDS)


def poll_report_task(spec: ScenarioAgentSpec, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
    """A runner's ``poll_tool_task`` of the ``report`` job: :func:`poll_report` with the poll's
    task, continuation and pending answer, mapped to the runner contract's outcomes."""
    assert poll.tool_call.task_id is not None
    pending = poll.pending_answer
    with scenario_session(poll.flow_id):
        outcome = poll_report(
            spec,
            poll.tool_call.task_id,
            continuation=poll.tool_call.input_continuation,
            pending_answer=pending.answer if pending is not None else None,
            answer_is_pending=pending is not None,
        )
    if isinstance(outcome, ScenarioQuestion):
        return scenario_input_requested(outcome)
    if isinstance(outcome, ScenarioTaskRunning):
        return ToolTaskPending(outcome.poll_interval_seconds, outcome.continuation)
    return ToolExecutionResult(outcome)


def report_deliveries(state_dir: Path, job_id: str) -> int:
    """How many times an answer changed the job: once, however often a poll repeated."""
    delivered: int = json.loads(_job_path(state_dir, job_id).read_text())["deliveries"]
    return delivered


def report_job_ids(state_dir: Path) -> list[str]:
    """Every job the scenario's ``report`` calls started."""
    return sorted(path.stem for path in (state_dir / "report-jobs").glob("*.json"))


def _job_path(state_dir: Path, job_id: str) -> Path:
    return state_dir / "report-jobs" / f"{job_id}.json"


def _write_job(path: Path, job: dict[str, object]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(job))
    temporary.replace(path)
