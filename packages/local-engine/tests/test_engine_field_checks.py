"""Issue case 8: values that would later fail or loop are refused where they enter.

A negative heartbeat timeout, a failure route to an empty Step type, a close-decision type or
reject reason outside its enum, and a ``wait_for`` result given to an ``execute`` task: from a
Client they answer INVALID_ARGUMENT with nothing stored; from a Worker they fail that Step
method at once with an error naming the field, and the Flow's history stays readable.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from datetime import timedelta

import dex
import grpc
import pytest
from dex import Flow, FlowStatus, Step, StepList
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from dex_local_engine.field_checks import MAX_SECONDS, BlobReferences, field_problem
from dex_local_engine.history_cli import run_history
from engine_kernel_harness import EngineProcess, running_engine, sdk_client
from raw_pull_worker import complete, execute_result, raw_pull_worker

WAIT = timedelta(seconds=60)


# --- The checks themselves ----------------------------------------------------------------------


def _close(kind: int) -> pb.InvokeExecuteMethodResponse:
    decision = pb.StepDecision(close_decision=pb.CloseDecision(close_decision_type=kind))  # type: ignore[arg-type]
    return pb.InvokeExecuteMethodResponse(step_decision=decision)


def _go_to(options: pb.StepOptions, step_type: str = "Next") -> pb.InvokeExecuteMethodResponse:
    movement = pb.StepMovement(step_type=step_type, step_options=options)
    return pb.InvokeExecuteMethodResponse(step_decision=pb.StepDecision(next_steps=[movement]))


_PROCEED = pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP

REFUSED_RESULTS: list[tuple[pb.InvokeExecuteMethodResponse, str]] = [
    (
        _go_to(pb.StepOptions(heartbeat_timeout_seconds=-1)),
        "step_decision.next_steps[0].step_options.heartbeat_timeout_seconds must not be "
        "negative, got -1",
    ),
    (
        _go_to(pb.StepOptions(execute_failure_policy=_PROCEED)),
        "next_steps[0].step_options.execute_failure_proceed_step_type is empty, but "
        "InvokeExecuteMethodResponse.step_decision.next_steps[0].step_options."
        "execute_failure_policy routes failures to that Step",
    ),
    (_close(99), "close_decision.close_decision_type is 99, which is not a CloseDecisionType"),
    (_go_to(pb.StepOptions(), step_type=""), "next_steps[0].step_type is empty"),
]


@pytest.mark.parametrize(("result", "named"), REFUSED_RESULTS)
def test_each_refused_result_names_its_field(
    result: pb.InvokeExecuteMethodResponse, named: str
) -> None:
    problem = field_problem(result, BlobReferences.KNOWN, lambda blob_id: True)
    assert problem is not None and named in problem


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (
            pb.StepOptions(execute_timeout_seconds=-5),
            "execute_timeout_seconds must not be negative",
        ),
        (
            pb.StepOptions(execute_retry_policy=pb.RetryPolicy(backoff_coefficient=0.5)),
            "backoff_coefficient must be at least 1",
        ),
        (
            pb.StepOptions(execute_retry_policy=pb.RetryPolicy(backoff_coefficient=float("nan"))),
            "must be a finite number",
        ),
        (
            pb.StepOptions(execute_failure_policy=7),
            "is 7, which is not a ExecuteMethodFailurePolicy",
        ),  # type: ignore[arg-type]
    ],
)
def test_step_options_are_checked_wherever_they_travel(options: pb.StepOptions, named: str) -> None:
    request = pb.StartFlowRequest(
        flow_id="f", flow_type="T", start_step_type="S", step_options=options
    )
    problem = field_problem(request, BlobReferences.REFUSED)
    assert problem is not None and named in problem


def test_a_timer_beyond_any_date_is_refused() -> None:
    timer = pb.TimerCondition(condition_id="t", duration_seconds=MAX_SECONDS + 1)
    result = pb.InvokeWaitForMethodResponse(
        waiting_condition=pb.WaitingCondition(timer_conditions=[timer])
    )
    problem = field_problem(result, BlobReferences.KNOWN, lambda blob_id: True)
    assert problem is not None
    assert "timer_conditions[0].duration_seconds must be at most" in problem


def test_what_the_sdk_sends_passes() -> None:
    options = pb.StepOptions(
        execute_timeout_seconds=30,
        heartbeat_timeout_seconds=5,
        execute_retry_policy=pb.RetryPolicy(
            initial_interval_seconds=1, backoff_coefficient=2.0, maximum_attempts=3
        ),
        execute_failure_policy=_PROCEED,
        execute_failure_proceed_step_type="Recover",
    )
    request = pb.StartFlowRequest(
        flow_id="f",
        flow_type="T",
        start_step_type="S",
        step_input=pb.Value(string_value="x" * 1000),
        step_options=options,
        flow_start_options=pb.FlowStartOptions(
            id_reuse_policy=pb.ID_REUSE_POLICY_ALLOW_IF_NO_RUNNING
        ),
    )
    assert field_problem(request, BlobReferences.REFUSED) is None
    assert field_problem(_close(pb.CLOSE_DECISION_TYPE_DEAD_END), BlobReferences.KNOWN) is None


# --- From a Client ------------------------------------------------------------------------------


@pytest.fixture
async def engine() -> AsyncIterator[EngineProcess]:
    async with running_engine() as started:
        yield started


async def test_client_requests_with_bad_fields_are_refused_and_store_nothing(
    engine: EngineProcess,
) -> None:
    async with grpc.aio.insecure_channel(engine.address) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        bad_calls = [
            stub.StartFlow(
                pb.StartFlowRequest(
                    flow_id="bad",
                    flow_type="ChecksFlow",
                    start_step_type="Finish",
                    step_options=pb.StepOptions(heartbeat_timeout_seconds=-1),
                )
            ),
            stub.StartFlow(
                pb.StartFlowRequest(
                    flow_id="bad",
                    flow_type="ChecksFlow",
                    start_step_type="Finish",
                    flow_timeout_seconds=-1,
                )
            ),
            stub.SyncAttributeIndexes(
                pb.SyncAttributeIndexRequest(attribute_indexes={"Status": 99})  # type: ignore[dict-item]
            ),
            stub.StopFlow(pb.StopFlowRequest(flow_id="bad", stop_type=42)),  # type: ignore[arg-type]
        ]
        for call in bad_calls:
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await call
            assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT, raised.value
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id="bad"))
        assert raised.value.code() is grpc.StatusCode.NOT_FOUND


# --- From a Worker ------------------------------------------------------------------------------


class Finish(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        return dex.force_complete("done")


class ChecksFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Finish())


def _history(address: str, flow_id: str) -> list[dict[str, object]]:
    out, err = io.StringIO(), io.StringIO()
    assert run_history(address, flow_id, out=out, err=err) == 0, err.getvalue()
    return [json.loads(line) for line in out.getvalue().splitlines()]


async def test_malformed_worker_results_fail_the_method_at_once_with_the_field_named(
    engine: EngineProcess,
) -> None:
    flow = ChecksFlow()
    wrong_kind = pb.InvokeWaitForMethodOutput(result=pb.InvokeWaitForMethodResponse())
    answers = {
        f"bad-{index}": (lambda task, result=result: execute_result(task, result), named)
        for index, (result, named) in enumerate(REFUSED_RESULTS)
    }
    answers["wrong-kind"] = (
        lambda task: [pb.PollWorkerTaskFrame(task_id=task.task_id, wait_for=wrong_kind)],
        "answered a InvokeExecuteMethodRequest task with a InvokeWaitForMethodOutput frame",
    )

    dangling = pb.Value(internal_blob_id_for_string_value="sha256-" + "0" * 64)
    heartbeat = pb.InvokeExecuteMethodOutput(heartbeat=pb.StepMethodHeartbeat(value=dangling))
    # Each bad frame is followed by a result: the engine drops it (the Step already failed), and
    # it frees the raw Worker's only stream for the next task.
    answers["bad-heartbeat"] = (
        lambda task: [
            pb.PollWorkerTaskFrame(task_id=task.task_id, execute=heartbeat),
            *execute_result(task, pb.InvokeExecuteMethodResponse(step_decision=complete())),
        ],
        "malformed heartbeat frame: StepMethodHeartbeat.value refers to blob",
    )
    stream_write = pb.InvokeExecuteMethodOutput(
        stream_write=pb.StepStreamWrite(stream_name="s", stream_capacity_bytes=-1)
    )
    answers["bad-stream-write"] = (
        lambda task: [
            pb.PollWorkerTaskFrame(task_id=task.task_id, execute=stream_write),
            *execute_result(task, pb.InvokeExecuteMethodResponse(step_decision=complete())),
        ],
        "StepStreamWrite.stream_capacity_bytes must not be negative, got -1",
    )

    def answer(task: pb.PollWorkerTask) -> list[pb.PollWorkerTaskFrame] | None:
        if task.WhichOneof("request") != "execute":
            return None
        respond, _ = answers[task.execute.context.flow_id]
        return respond(task)

    async with (
        sdk_client(engine, [flow]) as client,
        raw_pull_worker(engine.address, "ChecksFlow", answer) as worker,
    ):
        for flow_id in answers:
            await client.start_flow(flow, flow_id, "go")
        for flow_id, (_, named) in answers.items():
            result = await client.wait_for_flow(flow_id, timeout=WAIT)
            assert result.status is FlowStatus.FAILED, (flow_id, result)
            assert named in (result.error_message or ""), (flow_id, result)
            assert "malformed" in (result.error_message or "") or flow_id == "wrong-kind"
            events = await asyncio.to_thread(_history, engine.address, flow_id)
            failed = [e for e in events if e["event_type"] == "step_execute_failed"]
            assert len(failed) == 1 and failed[0]["attempt"] == 1, events  # no retry
            assert named in str(failed[0]["error"]), failed
        assert worker.ended is None  # a bad result fails the Step, not the Worker's stream
