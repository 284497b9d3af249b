"""Time travel (``ResetFlow``) through the SDK's public client: ``time_travel``.

An order Flow reserves, waits for an approval on a Channel (an RPC publishes it), then ships.
The tests reset it the ways an operator does (a bug fixed, to the Step that failed; from the
beginning; to one Step execution's ``wait_for`` or ``execute``; to a time) and check what the new
run holds: Attributes and Channel messages as at the reset point, Steps before it not run again,
the target and in-flight methods run again, RPC and Channel writes after the reset point applied
again unless skipped, and SubFlows resolved by their reuse policy. Nothing here touches engine
internals, so the same module runs against a Dex Server.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter
from datetime import UTC, datetime, timedelta

import dex
import grpc
import pytest
from dex import (
    Attribute,
    Channel,
    Flow,
    FlowStatus,
    PersistenceSchema,
    RetryPolicy,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    SubFlow,
    SubFlowOptions,
    SubFlowReusePolicy,
    Timer,
    TimeTravelOptions,
    TimeTravelStepMethod,
    TimeTravelType,
    Wait,
    go_to,
    graceful_complete,
    rpc,
)
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from engine_kernel_harness import EngineProcess, serving, serving_client
from engine_test_support import engine_command

WAIT = timedelta(seconds=30)
STEP_WAIT = dex.WaitForStepCompletionOptions()

CALLS: Counter[str] = Counter()
"""Step methods run, by ``<flow id>/<Step type>.<method>``."""
BROKEN: set[str] = set()
"""Flow IDs whose Ship Step raises (the bug an operator fixes before time travel)."""
HELD: dict[str, asyncio.Event] = {}
"""Flow IDs whose Ship Step waits for the event (it is in flight until then)."""


def _called(context: dex.AsyncContext, what: str) -> None:
    CALLS[f"{context.flow_id}/{what}"] += 1


class Reserve(Step[str]):
    def __init__(self, flow: Order) -> None:
        self.flow = flow

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        _called(context, "Reserve.execute")
        self.flow.log.set(context, f"{self.flow.log.get(context) or ''}reserve;")
        return go_to(Approve, input)


class Approve(Step[str]):
    def __init__(self, flow: Order) -> None:
        self.flow = flow

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        _called(context, "Approve.wait_for")
        return Wait.until(self.flow.approvals.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        _called(context, "Approve.execute")
        approval = ",".join(self.flow.approvals.results(context))
        self.flow.log.set(context, f"{self.flow.log.get(context)}approve:{approval};")
        return go_to(Ship, input)


class Ship(Step[str]):
    def __init__(self, flow: Order) -> None:
        self.flow = flow

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=1))

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        _called(context, "Ship.execute")
        held = HELD.get(context.flow_id)
        if held is not None:
            await held.wait()
        if context.flow_id in BROKEN:
            raise RuntimeError("the carrier API changed")
        return graceful_complete(
            f"{self.flow.log.get(context)}notes:{self.flow.notes.get(context)}"
        )


class Order(Flow[str]):
    def __init__(self) -> None:
        self.approvals = Channel("approvals", str)
        self.log = Attribute("log", str)
        self.notes = Attribute("notes", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Reserve(self)).other_steps(Approve(self), Ship(self))

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.approvals, self.log, self.notes)

    @rpc
    async def approve(self, context: dex.Context, text: str) -> RPCResult[str]:
        self.approvals.publish(context, text)
        return RPCResult(text)

    @rpc
    async def note(self, context: dex.Context, text: str) -> RPCResult[str]:
        self.notes.set(context, f"{self.notes.get(context) or ''}{text};")
        return RPCResult(text)

    @rpc
    async def state(self, context: dex.Context, text: str) -> RPCResult[str]:
        return RPCResult(f"log={self.log.get(context)} notes={self.notes.get(context)}")


class Double(Step[int]):
    async def execute(self, context: dex.AsyncContext, input: int) -> StepDecision:
        CALLS[f"{context.flow_id}/Double.execute"] += 1
        return graceful_complete(input * 2)


class Child(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Double())


CHILD = Child()


class Spawn(Step[str]):
    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        policy = SubFlowReusePolicy(input)
        return Wait.until(SubFlow.run(CHILD, 21, SubFlowOptions(reuse_policy=policy)))

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        result = SubFlow.get_condition_results(context, 0)
        return graceful_complete(result.completions[0].decode(int))


class Parent(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Spawn())


class Nap(Step[str]):
    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(hours=1)))

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete("napped")


class Listen(Step[str]):
    def __init__(self, flow: Napper) -> None:
        self.flow = flow

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        CALLS[f"{context.flow_id}/Listen.wait_for"] += 1
        return Wait.until(self.flow.pings.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete("heard")


class Napper(Flow[str]):
    def __init__(self) -> None:
        self.pings = Channel("pings", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Nap()).other_steps(Listen(self))

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.pings)

    @rpc
    async def listen(self, context: dex.Context, text: str) -> RPCResult[str]:
        return RPCResult(text, next_steps=(dex.StepMovement.of(Listen, text),))


ORDER = Order()
PARENT = Parent()
NAPPER = Napper()
FLOWS: list[Flow] = [ORDER, CHILD, PARENT, NAPPER]  # type: ignore[type-arg]


async def _calls(flow_id: str) -> dict[str, int]:
    prefix = f"{flow_id}/"
    return {key.removeprefix(prefix): n for key, n in CALLS.items() if key.startswith(prefix)}


async def _travel_to_step(
    client: dex.AsyncClient,
    flow_id: str,
    step_execution_id: str,
    method: TimeTravelStepMethod,
    *,
    skip_writes_reapply: bool = False,
) -> str:
    """Reset ``flow_id`` to ``method`` of ``step_execution_id``; the new run's ID."""
    options = TimeTravelOptions(
        type=TimeTravelType.STEP_EXECUTION_ID,
        step_execution_id=step_execution_id,
        step_method=method,
        skip_writes_reapply=skip_writes_reapply,
    )
    return await client.time_travel(flow_id, options)


async def test_a_failed_flow_travels_to_the_failed_step_once_the_bug_is_fixed() -> None:
    BROKEN.add("fix-1")
    async with serving_client(FLOWS) as client:
        first_run = await client.start_flow(ORDER, "fix-1", "o")
        await client.invoke_rpc(ORDER.approve, "fix-1", "yes")
        failed = await client.wait_for_flow("fix-1", timeout=WAIT)
        assert failed.status is FlowStatus.FAILED
        BROKEN.discard("fix-1")  # the fix is deployed

        new_run = await client.time_travel(
            "fix-1",
            TimeTravelOptions(type=TimeTravelType.STEP_TYPE, step_type="Ship", reason="fixed"),
        )
        assert new_run != first_run
        assert (await client.describe_flow("fix-1")).run_id == new_run
        result = await client.wait_for_flow("fix-1", timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED
    assert result.single_output(str) == "reserve;approve:yes;notes:None"
    # Only the Step reset to ran again; what came before it is replayed, not run.
    assert await _calls("fix-1") == {
        "Reserve.execute": 1,
        "Approve.wait_for": 1,
        "Approve.execute": 1,
        "Ship.execute": 2,
    }


async def test_from_the_beginning_state_restarts_and_later_writes_are_applied_again() -> None:
    async with serving_client(FLOWS) as client:
        first_run = await client.start_flow(ORDER, "begin-1", "o")
        await client.wait_for_step_completion(
            "begin-1", dex.StepExecutionId("Reserve", 1), STEP_WAIT
        )
        await client.invoke_rpc(ORDER.note, "begin-1", "n1")
        await client.time_travel("begin-1", TimeTravelOptions(type=TimeTravelType.BEGINNING))
        # The running first run was terminated; the new run starts over from the start Step.
        await client.wait_for_step_completion(
            "begin-1", dex.StepExecutionId("Reserve", 1), STEP_WAIT
        )
        state = await client.invoke_rpc(ORDER.state, "begin-1", "")
        await client.invoke_rpc(ORDER.approve, "begin-1", "ok")
        result = await client.wait_for_flow("begin-1", timeout=WAIT)
        assert (await client.describe_flow("begin-1")).run_id != first_run
    # Attributes restarted (one "reserve;"), and the RPC's write after the reset point is back.
    assert state == "log=reserve; notes=n1;"
    assert result.single_output(str) == "reserve;approve:ok;notes:n1;"
    assert (await _calls("begin-1"))["Reserve.execute"] == 2


async def test_skip_writes_reapply_drops_what_came_after_the_reset_point() -> None:
    async with serving_client(FLOWS) as client:
        await client.start_flow(ORDER, "skip-1", "o")
        await client.wait_for_step_completion(
            "skip-1", dex.StepExecutionId("Reserve", 1), STEP_WAIT
        )
        await client.invoke_rpc(ORDER.note, "skip-1", "late")
        await _travel_to_step(
            client, "skip-1", "Approve-1", TimeTravelStepMethod.WAIT_FOR, skip_writes_reapply=True
        )
        state = await client.invoke_rpc(ORDER.state, "skip-1", "")
        await client.invoke_rpc(ORDER.approve, "skip-1", "go")
        result = await client.wait_for_flow("skip-1", timeout=WAIT)
    assert state == "log=reserve; notes=None"
    assert result.single_output(str) == "reserve;approve:go;notes:None"
    calls = await _calls("skip-1")
    assert (calls["Reserve.execute"], calls["Approve.wait_for"]) == (1, 2)


async def test_an_execute_reset_consumes_its_channel_messages_again() -> None:
    BROKEN.add("exec-1")
    async with serving_client(FLOWS) as client:
        await client.start_flow(ORDER, "exec-1", "o")
        await client.invoke_rpc(ORDER.approve, "exec-1", "first")
        assert (await client.wait_for_flow("exec-1", timeout=WAIT)).status is FlowStatus.FAILED
        BROKEN.discard("exec-1")
        await _travel_to_step(client, "exec-1", "Approve-1", TimeTravelStepMethod.EXECUTE)
        result = await client.wait_for_flow("exec-1", timeout=WAIT)
    # The approval published before the reset point is pending again and read again.
    assert result.single_output(str) == "reserve;approve:first;notes:None"
    calls = await _calls("exec-1")
    assert (calls["Approve.wait_for"], calls["Approve.execute"], calls["Ship.execute"]) == (1, 2, 2)


async def test_a_history_time_before_the_start_resets_to_the_beginning_and_one_after_the_close_is_refused() -> (
    None
):
    BROKEN.add("time-1")
    async with serving_client(FLOWS) as client:
        before = datetime.now(UTC) - timedelta(seconds=1)
        await client.start_flow(ORDER, "time-1", "o")
        await client.invoke_rpc(ORDER.approve, "time-1", "yes")
        assert (await client.wait_for_flow("time-1", timeout=WAIT)).status is FlowStatus.FAILED
        after = datetime.now(UTC) + timedelta(seconds=1)
        with pytest.raises(dex.DexServiceError):
            await client.time_travel(
                "time-1",
                TimeTravelOptions(type=TimeTravelType.HISTORY_EVENT_TIME, history_event_time=after),
            )
        BROKEN.discard("time-1")
        await client.time_travel(
            "time-1",
            TimeTravelOptions(type=TimeTravelType.HISTORY_EVENT_TIME, history_event_time=before),
        )
        await client.wait_for_step_completion(
            "time-1", dex.StepExecutionId("Reserve", 1), STEP_WAIT
        )
        # The approval came by RPC after the reset point: it is applied again.
        result = await client.wait_for_flow("time-1", timeout=WAIT)
    assert result.single_output(str) == "reserve;approve:yes;notes:None"
    assert (await _calls("time-1"))["Reserve.execute"] == 2


async def test_an_unknown_step_is_refused_and_nothing_changes() -> None:
    async with serving_client(FLOWS) as client:
        run_id = await client.start_flow(ORDER, "none-1", "o")
        with pytest.raises(dex.DexServiceError, match="no Step method Nowhere"):
            await client.time_travel(
                "none-1", TimeTravelOptions(type=TimeTravelType.STEP_TYPE, step_type="Nowhere")
            )
        with pytest.raises(dex.FlowNotFoundError):
            await client.time_travel("nobody", TimeTravelOptions(type=TimeTravelType.BEGINNING))
        info = await client.describe_flow("none-1")
    assert (info.run_id, info.status) == (run_id, FlowStatus.RUNNING)


@pytest.mark.parametrize(
    ("policy", "child_runs"),
    [
        (SubFlowReusePolicy.ATTACH, 1),
        (SubFlowReusePolicy.RESTART_IF_PREVIOUS_EXITS_ABNORMALLY, 1),
        (SubFlowReusePolicy.ALWAYS_RESTART, 2),
    ],
    ids=["attach", "restart-if-abnormal", "always-restart"],
)
async def test_sub_flows_follow_their_reuse_policy_across_a_parents_reset(
    policy: SubFlowReusePolicy, child_runs: int
) -> None:
    flow_id = f"parent-{policy.value}"
    child_id = f"SubFlow:{flow_id}-Spawn-1-0"
    async with serving_client(FLOWS) as client:
        await client.start_flow(PARENT, flow_id, policy.value)
        assert (await client.wait_for_flow(flow_id, timeout=WAIT)).single_output(int) == 42
        child_run = (await client.describe_flow(child_id)).run_id
        await client.time_travel(flow_id, TimeTravelOptions(type=TimeTravelType.BEGINNING))
        result = await client.wait_for_flow(flow_id, timeout=WAIT)
        child_after = (await client.describe_flow(child_id)).run_id
    assert result.single_output(int) == 42
    assert (await _calls(child_id))["Double.execute"] == child_runs
    assert (child_after != child_run) == (child_runs == 2)


async def _ship_started(flow_id: str, times: int) -> None:
    for _ in range(600):
        if (await _calls(flow_id)).get("Ship.execute", 0) >= times:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"Ship of {flow_id} did not start {times} times")


async def test_an_in_flight_step_runs_again_in_the_new_run_and_its_old_result_is_dropped() -> None:
    HELD["flight-1"] = asyncio.Event()
    async with serving_client(FLOWS) as client:
        await client.start_flow(ORDER, "flight-1", "o")
        await client.invoke_rpc(ORDER.approve, "flight-1", "yes")
        await _ship_started("flight-1", 1)  # Ship-1 is on the Worker, held
        await _travel_to_step(client, "flight-1", "Ship-1", TimeTravelStepMethod.EXECUTE)
        await _ship_started("flight-1", 2)  # the new run's Ship-1, held too
        HELD.pop("flight-1").set()  # both attempts finish; only the new run's counts
        result = await client.wait_for_flow("flight-1", timeout=WAIT)
    assert result.single_output(str) == "reserve;approve:yes;notes:None"
    assert [c.step_execution_id for c in result.completions] == ["Ship-1"]
    calls = await _calls("flight-1")
    assert (calls["Approve.execute"], calls["Ship.execute"]) == (1, 2)


async def _command(*arguments: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [*engine_command(), *arguments],
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_the_reset_command_travels_and_history_shows_the_fork() -> None:
    BROKEN.add("cli-1")
    async with serving(FLOWS) as (engine, client):
        first_run = await client.start_flow(ORDER, "cli-1", "o")
        await client.invoke_rpc(ORDER.approve, "cli-1", "yes")
        assert (await client.wait_for_flow("cli-1", timeout=WAIT)).status is FlowStatus.FAILED
        BROKEN.discard("cli-1")
        refused = await _command(
            "reset", "--address", engine.address, "--to-step-type", "Nowhere", "cli-1"
        )
        no_method = await _command(
            "reset", "--address", engine.address, "--to-step-execution", "Ship-1", "cli-1"
        )
        done = await _command(
            "reset",
            "--address",
            engine.address,
            "--to-step-type",
            "Ship",
            "--reason",
            "fix",
            "cli-1",
        )
        assert done.returncode == 0, done.stderr
        printed = json.loads(done.stdout)
        result = await client.wait_for_flow("cli-1", timeout=WAIT)
        history = await _command("history", "--address", engine.address, "cli-1")
    assert refused.returncode == 1 and "no Step method Nowhere" in refused.stderr
    assert no_method.returncode == 1 and "--method wait_for or execute" in no_method.stderr
    assert printed["flow_id"] == "cli-1" and printed["run_id"] != first_run
    assert result.single_output(str) == "reserve;approve:yes;notes:None"
    lines = [json.loads(line) for line in history.stdout.splitlines()]
    summary = [(line["event_type"], line.get("step_execution_id")) for line in lines]
    # The events before the reset point are copied (the RPC may come before or after Approve's
    # wait_for), then the fork, then the new run's own.
    assert summary[0] == ("flow_started_or_continued", None)
    assert sorted(summary[1:5], key=str) == sorted(
        [
            ("step_execute_completed", "Reserve-1"),
            ("rpc_execution_completed", None),
            ("step_wait_for_completed", "Approve-1"),
            ("step_execute_completed", "Approve-1"),
        ],
        key=str,
    )
    assert lines[5]["previous_run_id"] == first_run
    assert summary[5:] == [
        ("time_travel_fork", None),
        ("step_execute_completed", "Ship-1"),
        ("flow_closed", None),
    ]


async def _flow_state(engine: EngineProcess, flow_id: str) -> pb.GetFlowStateResponse:
    async with grpc.aio.insecure_channel(engine.address) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        state: pb.GetFlowStateResponse = await stub.GetFlowState(
            pb.GetFlowStateRequest(flow_id=flow_id)
        )
        return state


async def _waiting(engine: EngineProcess, flow_id: str, count: int) -> pb.GetFlowStateResponse:
    for _ in range(600):
        state = await _flow_state(engine, flow_id)
        phases = [s.phase for s in state.active_step_executions]
        if phases.count(pb.ACTIVE_STEP_PHASE_WAITING) == count:
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"{flow_id}: not {count} waiting Steps")


async def test_a_replayed_timer_keeps_its_firing_time() -> None:
    """Nap-1's Timer started before the reset point (Listen-1's wait_for, which an RPC started
    later): it is not started again."""
    async with serving(FLOWS) as (engine, client):
        await client.start_flow(NAPPER, "nap-1", "x")
        await _waiting(engine, "nap-1", 1)
        await client.invoke_rpc(NAPPER.listen, "nap-1", "x")
        before = await _waiting(engine, "nap-1", 2)
        await asyncio.sleep(1.1)  # so a Timer started again would fire in a later second
        await _travel_to_step(client, "nap-1", "Listen-1", TimeTravelStepMethod.WAIT_FOR)
        after = await _waiting(engine, "nap-1", 2)
        await client.stop_flow("nap-1")

    def nap_timers(state: pb.GetFlowStateResponse) -> list[int]:
        (nap,) = [s for s in state.active_step_executions if s.step_execution_id == "Nap-1"]
        return [timer.firing_unix_timestamp_seconds for timer in nap.timers]

    assert nap_timers(after) == nap_timers(before) != []
    assert (await _calls("nap-1"))["Listen.wait_for"] == 2
