"""``last_failure_info`` of active Step executions, as Dex Server fills it.

Flows run through the SDK's public client and Worker; the Flow state is read with the SDK's own
FlowService stub (``GetFlowState``; the public client has no call for it), so the same module runs
against a Dex Server.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import dex
import grpc
from dex import (
    Flow,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    StopFlowOptions,
    StopType,
    Wait,
    graceful_complete,
)
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from engine_kernel_harness import EngineProcess, serving

# The first retry comes after a second, the second after an hour: attempt 2's failure stays.
SECOND_FAILURE_STAYS = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=3600.0
)
NEVER_AGAIN_SOON = RetryPolicy(initial_interval=timedelta(hours=1))


class Ledger(Step[str]):
    """Its execute always raises, naming the attempt."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=SECOND_FAILURE_STAYS)

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        raise RuntimeError(f"the ledger is locked (attempt {context.attempt})")


class Gate(Step[str]):
    """Its wait_for always raises."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(wait_for_retry=NEVER_AGAIN_SOON)

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        raise RuntimeError("the gate is stuck")

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete("opened")


class Slow(Step[str]):
    """Sleeps past its execute timeout."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_method_timeout=timedelta(seconds=1), execute_retry=NEVER_AGAIN_SOON
        )

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        await asyncio.sleep(30)
        return graceful_complete("late")


class Silent(Step[str]):
    """Sleeps past its heartbeat timeout without a heartbeat."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(heartbeat_timeout=timedelta(seconds=1), execute_retry=NEVER_AGAIN_SOON)

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        await asyncio.sleep(30)
        return graceful_complete("late")


def _flow(name: str, start: Step[str]) -> Flow[str]:
    class _Single(Flow[str]):
        def get_steps(self) -> StepList[str]:
            return StepList.start_step(start)

    _Single.__name__ = _Single.__qualname__ = name
    return _Single()


LEDGER = _flow("LedgerFlow", Ledger())
GATE = _flow("GateFlow", Gate())
SLOW = _flow("SlowFlow", Slow())
SILENT = _flow("SilentFlow", Silent())
FLOWS: list[Flow] = [LEDGER, GATE, SLOW, SILENT]  # type: ignore[type-arg]


async def _failing_step(
    engine: EngineProcess, flow_id: str, attempt: int
) -> pb.ActiveStepExecutionState:
    """The Flow's only active Step once its ``last_failure_info`` names ``attempt``."""
    async with grpc.aio.insecure_channel(engine.address) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        for _ in range(600):
            state = await stub.GetFlowState(pb.GetFlowStateRequest(flow_id=flow_id))
            steps = list(state.active_step_executions)
            if steps and steps[0].last_failure_info.attempt == attempt:
                assert len(steps) == 1
                return steps[0]
            await asyncio.sleep(0.1)
    raise AssertionError(f"{flow_id}: no failure of attempt {attempt} in 60 s")


async def test_a_retrying_execute_shows_the_workers_error_from_its_failed_attempt() -> None:
    async with serving(FLOWS) as (engine, client):
        await client.start_flow(LEDGER, "ledger", "x")
        step = await _failing_step(engine, "ledger", 2)
        await client.stop_flow("ledger", StopFlowOptions(StopType.TERMINATE))
    assert (step.step_execution_id, step.phase) == ("Ledger-1", pb.ACTIVE_STEP_PHASE_ACTIVE)
    failure = step.last_failure_info
    assert failure.backend_error == "FLOW_ERROR_TYPE_WORKER_API_FAIL"
    details = failure.details
    assert details.detail == ""
    assert details.sub_status == pb.ERROR_SUB_STATUS_WORKER_API_ERROR
    assert details.original_worker_error_detail == "the ledger is locked (attempt 2)"
    assert details.original_worker_error_type == "builtins.RuntimeError"
    assert "RuntimeError" in details.original_worker_error_stack_trace
    assert "raise RuntimeError" in details.original_worker_error_stack_trace


async def test_a_retrying_wait_for_shows_its_failure() -> None:
    async with serving(FLOWS) as (engine, client):
        await client.start_flow(GATE, "gate", "x")
        step = await _failing_step(engine, "gate", 1)
        await client.stop_flow("gate")
    assert step.step_execution_id == "Gate-1"
    assert step.last_failure_info.backend_error == "FLOW_ERROR_TYPE_WORKER_API_FAIL"
    details = step.last_failure_info.details
    assert details.original_worker_error_detail == "the gate is stuck"
    assert details.original_worker_error_type == "builtins.RuntimeError"


async def test_timed_out_attempts_name_the_timeout() -> None:
    async with serving(FLOWS) as (engine, client):
        await client.start_flow(SLOW, "slow", "x")
        await client.start_flow(SILENT, "silent", "x")
        slow = await _failing_step(engine, "slow", 1)
        silent = await _failing_step(engine, "silent", 1)
        await client.stop_flow("slow")
        await client.stop_flow("silent")
    assert slow.last_failure_info.backend_error == "TIMEOUT_TYPE_START_TO_CLOSE"
    assert silent.last_failure_info.backend_error == "TIMEOUT_TYPE_HEARTBEAT", silent
    for step in (slow, silent):
        assert step.last_failure_info.details.original_worker_error_detail == ""
