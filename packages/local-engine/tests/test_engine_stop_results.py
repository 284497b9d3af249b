"""Stop and Flow-timeout results as Dex Server reports them, through the SDK's public client.

Every stop type (with and without a reason) and every Flow timeout outcome (FAIL and CANCEL
policies, and each kind of timeout-handler decision) is checked for its status, error type and
error message, as ``wait_for_flow`` returns them. Nothing here touches engine internals, so the
same module runs against a Dex Server.
"""

from __future__ import annotations

from datetime import timedelta

import dex
import pytest
from dex import (
    Flow,
    FlowErrorType,
    FlowStatus,
    FlowTimeoutPolicy,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    StopFlowOptions,
    StopType,
    Timer,
    Wait,
    go_to,
    graceful_complete,
)
from engine_kernel_harness import serving_client

WAIT = timedelta(seconds=30)
ONE_SECOND = timedelta(seconds=1)
STEP_WAIT = dex.WaitForStepCompletionOptions()


class Park(Step[str]):
    """Waits an hour: the Flow stays running until it is stopped or times out."""

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(hours=1)))

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete(f"parked:{input}")


class Finish(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete(f"finish:{input}")


class Parked(Flow[str]):
    """A Flow without a timeout handler."""

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Park()).other_steps(Finish())


HANDLER_RUNS: list[str] = []


class Handled(Flow[str]):
    """A Flow whose timeout handler decides by the Flow ID's prefix."""

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Park()).other_steps(Finish())

    async def handle_timeout(self, context: dex.AsyncContext) -> StepDecision:  # type: ignore[override]
        flow_id = context.flow_id
        HANDLER_RUNS.append(flow_id)
        if flow_id.startswith("fail"):
            return dex.force_fail("processing deadline reached")
        if flow_id.startswith("complete"):
            return dex.force_complete("closed by the handler")
        if flow_id.startswith("raise"):
            raise RuntimeError("the handler broke")
        # go_to: the parked Step keeps running beside Finish, as on Dex.
        return go_to(Finish, "after-timeout")


PARKED = Parked()
HANDLED = Handled()
FLOWS: list[Flow] = [PARKED, HANDLED]  # type: ignore[type-arg]


def _outcome(result: dex.FlowResult) -> tuple[FlowStatus, FlowErrorType | None, str | None]:
    return result.status, result.error_type, result.error_message


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (StopFlowOptions(), (FlowStatus.CANCELED, None, None)),
        (StopFlowOptions(reason="customer cancelled"), (FlowStatus.CANCELED, None, None)),
        (StopFlowOptions(StopType.TERMINATE), (FlowStatus.TERMINATED, None, None)),
        (StopFlowOptions(StopType.TERMINATE, "runaway"), (FlowStatus.TERMINATED, None, None)),
        (
            StopFlowOptions(StopType.FAIL),
            (FlowStatus.FAILED, FlowErrorType.CLIENT_API_FAILED, "fail by client"),
        ),
        (
            StopFlowOptions(StopType.FAIL, "bad order"),
            (FlowStatus.FAILED, FlowErrorType.CLIENT_API_FAILED, "bad order"),
        ),
    ],
    ids=[
        "cancel",
        "cancel-with-reason",
        "terminate",
        "terminate-with-reason",
        "fail",
        "fail-with-reason",
    ],
)
async def test_each_stop_type_reports_what_dex_reports(
    options: StopFlowOptions,
    expected: tuple[FlowStatus, FlowErrorType | None, str | None],
) -> None:
    async with serving_client(FLOWS) as client:
        await client.start_flow(PARKED, "stopped", "x")
        await client.stop_flow("stopped", options)
        result = await client.wait_for_flow("stopped", timeout=WAIT)
        assert _outcome(result) == expected
        assert result.completions == ()
        with pytest.raises(dex.FlowNotActiveOrNotFoundError):
            await client.stop_flow("stopped", options)


async def test_flow_timeouts_without_a_handler_report_what_dex_reports() -> None:
    async with serving_client(FLOWS) as client:
        await client.start_flow(PARKED, "t-fail", "x", StartFlowOptions(timeout=ONE_SECOND))
        await client.start_flow(
            PARKED,
            "t-cancel",
            "x",
            StartFlowOptions(timeout=ONE_SECOND, timeout_policy=FlowTimeoutPolicy.CANCEL),
        )
        failed = await client.wait_for_flow("t-fail", timeout=WAIT)
        canceled = await client.wait_for_flow("t-cancel", timeout=WAIT)
    assert _outcome(failed) == (
        FlowStatus.FAILED,
        FlowErrorType.FLOW_TIMEOUT,
        "Flow timed out after 1 seconds",
    )
    assert _outcome(canceled) == (FlowStatus.CANCELED, None, None)


async def test_a_cancel_policy_overrides_the_handler_and_reports_no_reason() -> None:
    HANDLER_RUNS.clear()
    async with serving_client(FLOWS) as client:
        overridden = StartFlowOptions(timeout=ONE_SECOND, timeout_policy=FlowTimeoutPolicy.CANCEL)
        await client.start_flow(HANDLED, "fail-overridden", "x", overridden)
        result = await client.wait_for_flow("fail-overridden", timeout=WAIT)
    assert _outcome(result) == (FlowStatus.CANCELED, None, None)
    assert HANDLER_RUNS == []


async def test_timeout_handler_decisions_report_what_dex_reports() -> None:
    HANDLER_RUNS.clear()
    timed = StartFlowOptions(timeout=ONE_SECOND)
    never_retried = dex.RetryPolicy(maximum_attempts=1)
    async with serving_client(FLOWS) as client:
        await client.start_flow(HANDLED, "fail-1", "x", timed)
        await client.start_flow(HANDLED, "complete-1", "x", timed)
        await client.start_flow(HANDLED, "goto-1", "x", timed)
        failed = await client.wait_for_flow("fail-1", timeout=WAIT)
        completed = await client.wait_for_flow("complete-1", timeout=WAIT)
        await client.wait_for_step_completion("goto-1", dex.StepExecutionId("Finish", 1), STEP_WAIT)
        # The handler's go_to left the parked Step running: the Flow waits for it.
        assert (await client.describe_flow("goto-1")).status is FlowStatus.RUNNING
        await client.stop_flow("goto-1", StopFlowOptions(StopType.FAIL, "enough waiting"))
        stopped = await client.wait_for_flow("goto-1", timeout=WAIT)

        await client.start_flow(
            HANDLED,
            "raise-1",
            "x",
            StartFlowOptions(
                timeout=ONE_SECOND,
                timeout_handler_options=dex.FlowTimeoutHandlerOptions(retry=never_retried),
            ),
        )
        broken = await client.wait_for_flow("raise-1", timeout=WAIT)
    assert _outcome(failed) == (
        FlowStatus.FAILED,
        FlowErrorType.STEP_DECISION_FAILED,
        "processing deadline reached",
    )
    assert _outcome(completed) == (FlowStatus.COMPLETED, None, None)
    assert [c.decode(str) for c in completed.completions] == ["closed by the handler"]
    assert [c.step_execution_id for c in completed.completions] == ["sys:timeout_handler-1"]
    assert _outcome(stopped) == (
        FlowStatus.FAILED,
        FlowErrorType.CLIENT_API_FAILED,
        "enough waiting",
    )
    assert [c.decode(str) for c in stopped.completions] == ["finish:after-timeout"]
    assert broken.status is FlowStatus.FAILED
    assert broken.error_type is FlowErrorType.WORKER_API_FAILED
    assert broken.error_message == "the handler broke"
    assert sorted(HANDLER_RUNS) == ["complete-1", "fail-1", "goto-1", "raise-1"]
