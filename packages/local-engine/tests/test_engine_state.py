"""Kernel state and protocol surface through the real SDK: history events, search by active
Steps, Attribute locks, conditions over Channels and ChannelMaps with load options, a sync Client,
attempts that never reach a Worker, bad requests, and persistence across SIGKILL."""

from __future__ import annotations

import asyncio
import socket
from datetime import timedelta
from pathlib import Path

import dex
import grpc
import pytest
from dex import (
    Attribute,
    AttributeMap,
    Channel,
    ChannelMap,
    ConditionCombination,
    Flow,
    FlowStatus,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepExecutionId,
    StepList,
    StepMovement,
    StepOptions,
    Timer,
    Wait,
    go_to,
    graceful_complete,
    rpc,
)
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from engine_kernel_harness import (
    EngineProcess,
    reachable,
    running_engine,
    sdk_client,
    sdk_worker,
    serve_once,
    serving,
    serving_client,
)
from google.protobuf import empty_pb2

WAIT = timedelta(seconds=30)
STEP_WAIT = dex.WaitForStepCompletionOptions()

BALANCE = Attribute("balance", int)


class Route(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        if input == "hold":
            return go_to(Hold, input)
        if input == "gather":
            return go_to(Gather, input)
        if input == "nap":
            return go_to(Nap, input)
        return go_to(Idle, input)


class Idle(Step[str]):
    def __init__(self, flow: StateFlow) -> None:
        self.flow = flow

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(self.flow.go.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete(f"idle:{input}")


class Hold(Step[str]):
    def __init__(self, flow: StateFlow) -> None:
        self.flow = flow

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.balance.lock(),))

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        self.flow.hold_entered.set()
        await self.flow.hold_release.wait()
        self.flow.balance.set(context, self.flow.balance.get(context) + 10)
        return graceful_complete(f"held:{self.flow.balance.get(context)}")


class Gather(Step[str]):
    """Waits for either two 'go' messages and a 'votes/alice' message, or a 'stop' message."""

    def __init__(self, flow: StateFlow) -> None:
        self.flow = flow

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_load_attribute_maps=(self.flow.notes,),
            execute_load_channel_maps=(self.flow.votes,),
        )

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.any_combination_of(
            ConditionCombination.of(
                self.flow.go.for_n(2, condition_id="two-go"),
                self.flow.votes.for_one("alice", condition_id="alice"),
            ),
            ConditionCombination.of(self.flow.stop.for_one(condition_id="stop")),
        )

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        go = list(self.flow.go.results(context))
        alice = list(self.flow.votes.results(context, "alice"))
        pending_bob = [m.value for m in self.flow.votes.pending_messages(context, "bob")]
        notes = {
            key: self.flow.notes.get(context, key)
            for key in self.flow.notes.get_all_instance_keys(context)
        }
        return graceful_complete(
            f"go={go} alice={alice} bob={pending_bob} notes={sorted(notes.items())}"
        )


class AfterGhost(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        error = context.recovery_error
        return graceful_complete(
            f"{context.from_step_execution_id}:{error.detail if error else ''}"
        )


class Nap(Step[str]):
    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=2)))

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        return graceful_complete(f"rested:{context.has_timer_fired(0)}")


class StateFlow(Flow[str]):
    def __init__(self) -> None:
        self.go = Channel("go", str)
        self.stop = Channel("stop", str)
        self.votes = ChannelMap("votes", str)
        self.balance = BALANCE
        self.notes = AttributeMap("notes", str)
        # The Hold Step sets hold_entered, then waits in its execute for hold_release. They
        # belong to this Flow object, so each test has its own; the Worker runs in its loop.
        self.hold_entered = asyncio.Event()
        self.hold_release = asyncio.Event()

    def get_flow_type(self) -> str:
        return "StateFlow"

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Route()).other_steps(
            Idle(self), Hold(self), Gather(self), AfterGhost(), Nap()
        )

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.go, self.stop, self.votes, self.balance, self.notes)

    @rpc(lock_attributes=())
    async def send(self, context: dex.Context, channel: str) -> RPCResult[str]:
        name, _, instance = channel.partition("/")
        if name == "votes":
            self.votes.publish(context, instance, f"vote-{instance}")
        elif name == "stop":
            self.stop.publish(context, "stop")
        else:
            self.go.publish(context, f"go-{self.go.size(context)}")
        self.notes.set(context, name, channel)
        return RPCResult("sent")

    @rpc(lock_attributes=(BALANCE.lock(),))
    async def locked_add(self, context: dex.Context, amount: int) -> RPCResult[int]:
        value = self.balance.get(context) + amount
        self.balance.set(context, value)
        return RPCResult(value)

    @rpc
    async def peek(self, context: dex.Context) -> RPCResult[int]:
        return RPCResult(self.balance.get(context))

    @rpc
    async def store_note(self, context: dex.Context, size: int) -> RPCResult[int]:
        self.notes.set(context, "big", "x" * size)
        return RPCResult(size)

    @rpc
    async def park(self, context: dex.Context, text: str) -> RPCResult[str]:
        return RPCResult(text, next_steps=(StepMovement.of(Idle, text),))


def _stub(engine: EngineProcess) -> tuple[grpc.aio.Channel, dex_pb2_grpc.FlowServiceStub]:
    channel = grpc.aio.insecure_channel(engine.address)
    return channel, dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]


# --------------------------------------------------------------------------- tests


async def test_history_records_step_method_events_in_order() -> None:
    flow = StateFlow()
    async with serving([flow]) as (engine, client):
        await client.start_flow(flow, "s-history", "idle")
        assert await client.invoke_rpc(flow.send, "s-history", "go") == "sent"
        result = await client.wait_for_flow("s-history", timeout=WAIT)
        assert result.status is FlowStatus.COMPLETED
        channel, stub = _stub(engine)
        async with channel:
            response = await stub.GetHistoryEvents(pb.GetHistoryEventsRequest(flow_id="s-history"))
        kinds = [event.WhichOneof("payload") for event in response.events]
        assert kinds[0] == "flow_started_or_continued"
        assert kinds[-1] == "flow_closed"
        steps = [
            (
                kind,
                getattr(event, kind).context.step_execution_id,
                getattr(event, kind).context.from_step_execution_id,
                getattr(event, kind).context.final_attempt,
            )
            for event, kind in zip(response.events, kinds, strict=True)
            if kind.startswith("step_")
        ]
        assert steps == [
            ("step_execute_completed", "Route-1", "__start__", 1),
            ("step_wait_for_completed", "Idle-1", "Route-1", 1),
            ("step_execute_completed", "Idle-1", "Route-1", 1),
        ]
        assert "rpc_execution_completed" in kinds
        assert [e.event_id for e in response.events] == list(range(1, len(kinds) + 1))


async def _all_history(
    stub: dex_pb2_grpc.FlowServiceStub, flow_id: str
) -> list[pb.FlowHistoryEvent]:
    events: list[pb.FlowHistoryEvent] = []
    token = b""
    while True:
        response = await stub.GetHistoryEvents(
            pb.GetHistoryEventsRequest(
                flow_id=flow_id, estimate_page_size=500, next_page_token=token
            )
        )
        events += response.events
        token = response.next_page_token
        if not token:
            return events


async def test_history_pages_fit_a_client_and_read_only_rpcs_record_nothing() -> None:
    flow = StateFlow()
    async with serving([flow]) as (engine, client):
        await client.start_flow(flow, "s-pages", "idle")
        note = 1_200_000
        for _ in range(4):  # about 5 MiB of history: more than one 4 MiB response
            assert await client.invoke_rpc(flow.store_note, "s-pages", note) == note
        channel, stub = _stub(engine)  # gRPC's default 4 MiB receive limit
        async with channel:
            before = await _all_history(stub, "s-pages")
            for _ in range(3):
                assert await client.invoke_rpc(flow.peek, "s-pages") == 0
            after = await _all_history(stub, "s-pages")
        rpc_events = [e for e in before if e.WhichOneof("payload") == "rpc_execution_completed"]
        assert [e.rpc_execution_completed.rpc_name for e in rpc_events] == ["store_note"] * 4
        assert [e.event_id for e in before] == list(range(1, len(before) + 1))
        assert [e.event_id for e in after] == [e.event_id for e in before]


async def test_search_finds_flows_by_active_step_type() -> None:
    flow = StateFlow()
    async with serving_client([flow]) as client:
        options = dex.StartFlowOptions(
            config_override=dex.FlowConfig(active_step_search_mode=dex.ActiveStepSearchMode.ALL)
        )
        await client.start_flow(flow, "s-search-idle", "idle", options)
        await client.start_flow(flow, "s-search-done", "idle", options)
        await client.wait_for_step_completion(
            "s-search-idle", StepExecutionId("Route", 1), STEP_WAIT
        )
        await client.invoke_rpc(flow.send, "s-search-done", "go")
        await client.wait_for_flow("s-search-done", timeout=WAIT)
        page = await client.search_flows('ActiveStepTypes = "Idle"', 10)
        assert [entry.flow_id for entry in page.flows] == ["s-search-idle"]
        page = await client.search_flows("ExecutionStatus = 'Completed'", 10)
        assert [entry.flow_id for entry in page.flows] == ["s-search-done"]


async def test_rpc_lock_conflict_while_a_step_holds_the_lock() -> None:
    flow = StateFlow()
    async with serving_client([flow]) as client:
        await client.start_flow(flow, "s-lock", "hold")
        await asyncio.wait_for(flow.hold_entered.wait(), 30)
        with pytest.raises(dex.RpcLockConflictError):
            await client.invoke_rpc(flow.locked_add, "s-lock", 1)
        flow.hold_release.set()
        result = await client.wait_for_flow("s-lock", timeout=WAIT)
        assert result.completions[0].decode(str) == "held:10"


async def test_combination_wait_over_channel_maps_with_loads() -> None:
    flow = StateFlow()
    async with serving_client([flow]) as client:
        await client.start_flow(flow, "s-gather", "gather")
        for target in ("go", "votes/bob", "go", "votes/alice"):
            assert await client.invoke_rpc(flow.send, "s-gather", target) == "sent"
        result = await client.wait_for_flow("s-gather", timeout=WAIT)
        assert result.completions[0].decode(str) == (
            "go=['go-0', 'go-1'] alice=['vote-alice'] bob=['vote-bob'] "
            "notes=[('go', 'go'), ('votes', 'votes/alice')]"
        )


async def _start_ghost(
    engine: EngineProcess, flow_id: str, target: pb.WorkerTarget, *, timeout: int
) -> None:
    """Start a StateFlow at the Step type 'Ghost', which no Worker serves; one attempt of
    ``timeout`` seconds, then the recovery Step 'AfterGhost'."""
    channel, stub = _stub(engine)
    async with channel:
        await stub.StartFlow(
            pb.StartFlowRequest(
                flow_id=flow_id,
                flow_type="StateFlow",
                start_step_type="Ghost",
                step_input=pb.Value(string_value="boo"),
                flow_start_options=pb.FlowStartOptions(
                    flow_config_override=pb.FlowConfig(worker_target=target)
                ),
                step_options=pb.StepOptions(
                    skip_wait_for=True,
                    execute_timeout_seconds=timeout,
                    execute_retry_policy=pb.RetryPolicy(maximum_attempts=1),
                    execute_failure_policy=pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP,
                    execute_failure_proceed_step_type="AfterGhost",
                    execute_failure_proceed_step_options=pb.StepOptions(skip_wait_for=True),
                ),
            )
        )


async def test_an_attempt_no_worker_could_take_recovers_as_not_started() -> None:
    """The start Step 'Ghost' is unknown to every Worker, so its only attempt times out unstarted."""
    flow = StateFlow()
    async with serving([flow]) as (engine, client):
        await _start_ghost(engine, "s-ghost", pb.WorkerTarget(is_pull_mode=True), timeout=1)
        result = await client.wait_for_flow("s-ghost", timeout=WAIT)
        text = result.completions[0].decode(str)
        assert text.startswith("Ghost-1:")
        assert "attempt_progress: NOT_STARTED" in text


async def test_an_unreachable_listening_worker_times_the_attempt_out_as_not_started() -> None:
    """Each dispatch to a listening address nobody serves fails unstarted and goes out again; the
    attempt still times out from its first dispatch instead of being redispatched forever."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        nobody = f"127.0.0.1:{probe.getsockname()[1]}"
    async with running_engine() as engine:
        await _start_ghost(engine, "s-unreachable", pb.WorkerTarget(address=nobody), timeout=2)

        # The recovery Step also goes to the unreachable address, so the Flow keeps running;
        # the history shows the start Step's attempt failed unstarted.
        async def ghost_failed() -> pb.FlowHistoryEvent | None:
            channel, stub = _stub(engine)
            async with channel:
                page = await stub.GetHistoryEvents(
                    pb.GetHistoryEventsRequest(flow_id="s-unreachable")
                )
            for event in page.events:
                if event.HasField("step_execute_failed"):
                    return event
            return None

        deadline = asyncio.get_running_loop().time() + 30
        failed = await ghost_failed()
        while failed is None and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.2)
            failed = await ghost_failed()
        assert failed is not None, "the unreachable attempt never timed out"
        assert failed.step_execute_failed.context.step_type == "Ghost"
        assert failed.step_execute_failed.context.final_attempt == 1
        failure = failed.step_execute_failed.output.failure
        assert failure.backend_error == "TIMEOUT_TYPE_START_TO_CLOSE"
        assert "exceeded its timeout" in failure.details.detail


def test_sync_client_drives_a_flow(tmp_path: Path) -> None:
    flow = StateFlow()

    async def run_worker(engine: EngineProcess, stop: asyncio.Event) -> None:
        async with sdk_worker(engine, [flow]):
            await stop.wait()

    async def scenario() -> str:
        async with running_engine() as engine:
            stop = asyncio.Event()
            worker = asyncio.create_task(run_worker(engine, stop))
            await asyncio.sleep(0.5)
            text = await asyncio.to_thread(_sync_run, engine, flow)
            stop.set()
            await worker
            return text

    assert asyncio.run(scenario()) == "idle:sync"


def _sync_run(engine: EngineProcess, flow: StateFlow) -> str:
    cache = dex.open_blob_cache(
        dex.BlobCacheConfig(str(engine.database.parent / "sync-cache"), 1 << 24)
    )
    options = dex.ClientOptions(
        server_address=engine.address, worker_target=dex.WorkerTarget(pull=True)
    )
    with dex.Client(dex.Registry([flow], allow_async_handlers=True), cache, options) as client:
        client.start_flow(flow, "s-sync", "sync")
        assert client.invoke_rpc(flow.send, "s-sync", "go") == "sent"
        result = client.wait_for_flow("s-sync", timeout=WAIT)
        assert client.describe_flow("s-sync").status is FlowStatus.COMPLETED
        return str(result.completions[0].decode(str))


async def test_bad_requests_get_typed_errors_naming_the_problem() -> None:
    async with running_engine() as engine:
        channel, stub = _stub(engine)
        async with channel:
            info = await stub.GetServerInfo(empty_pb2.Empty())
            assert (info.minimum_supported_protocol_version, info.current_protocol_version) == (
                1,
                3,
            )
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stub.StartFlow(pb.StartFlowRequest(flow_id="x", start_step_type="S"))
            assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert "flow_type" in (raised.value.details() or "")
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id="missing"))
            assert raised.value.code() is grpc.StatusCode.NOT_FOUND
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stub.ResetFlow(pb.ResetFlowRequest(flow_id="missing"))
            assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert "time travel type is required" in (raised.value.details() or "")
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stub.TriggerContinueAsNew(pb.TriggerContinueAsNewRequest(flow_id="missing"))
            assert raised.value.code() is grpc.StatusCode.UNIMPLEMENTED
            assert "not supported by dex-local-engine" in (raised.value.details() or "")
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stub.WaitForFlow(
                    pb.WaitForFlowRequest(flow_id="missing", wait_time_seconds=-1)
                )
            assert raised.value.code() in (
                grpc.StatusCode.NOT_FOUND,
                grpc.StatusCode.INVALID_ARGUMENT,
            )
            await stub.HealthCheck(empty_pb2.Empty())


async def test_waiting_timer_fires_after_engine_sigkill_and_restart() -> None:
    flow = StateFlow()
    async with running_engine() as engine:
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await client.start_flow(flow, "s-nap", "nap")
            await client.wait_for_step_completion("s-nap", StepExecutionId("Route", 1), STEP_WAIT)
            await asyncio.sleep(0.3)  # Nap's wait_for completes and its Timer is committed
        engine.kill()
        engine.start()
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await reachable(client)
            result = await client.wait_for_flow("s-nap", timeout=WAIT)
            assert result.status is FlowStatus.COMPLETED
            assert result.completions[0].decode(str) == "rested:True"


def test_serve_rejects_a_busy_port_and_an_unusable_database(tmp_path: Path) -> None:
    engine = EngineProcess(tmp_path / "engine.db")
    engine.start()
    try:
        busy = serve_once(tmp_path / "other.db", engine.address)
        assert busy.returncode == 1
        assert engine.address in busy.stderr
        (tmp_path / "not-a-db").write_text("this is not sqlite" * 100)
        bad = serve_once(tmp_path / "not-a-db")
        assert bad.returncode == 1
        assert "not-a-db" in bad.stderr
        out_of_range = serve_once(tmp_path / "third.db", "127.0.0.1:99999")
        assert out_of_range.returncode == 1
        assert "port must be a number from 0 to 65535" in out_of_range.stderr
    finally:
        assert engine.stop() == 0


def test_a_second_engine_on_the_same_database_refuses_until_the_first_is_killed(
    tmp_path: Path,
) -> None:
    engine = EngineProcess(tmp_path / "engine.db")
    engine.start()
    try:
        second = serve_once(engine.database)
        assert second.returncode == 1
        assert second.stdout == ""
        assert "unusable database" in second.stderr
        assert "another dex-local-engine" in second.stderr
        # The OS releases the lock of a SIGKILLed engine: a restart takes the database over.
        engine.kill()
        engine.start()
    finally:
        assert engine.stop() == 0


async def test_large_values_travel_and_oversized_values_are_refused() -> None:
    flow = StateFlow()
    async with serving_client([flow]) as client:
        await client.start_flow(flow, "s-big", "idle")
        two_mib = 2 * 1024 * 1024
        assert await client.invoke_rpc(flow.store_note, "s-big", two_mib) == two_mib
        with pytest.raises(dex.DexServiceError) as raised:
            await client.invoke_rpc(flow.store_note, "s-big", 5 * 1024 * 1024)
        assert "Attribute 'notes/big'" in str(raised.value)
        assert "value limit" in str(raised.value)
        # The refused write changed nothing and the Flow still works.
        assert await client.invoke_rpc(flow.send, "s-big", "go") == "sent"
        result = await client.wait_for_flow("s-big", timeout=WAIT)
        assert result.status is FlowStatus.COMPLETED


async def test_update_config_attributes_and_flow_state_over_the_wire() -> None:
    flow = StateFlow()
    async with serving([flow]) as (engine, client):
        await client.start_flow(flow, "s-config", "idle")
        await client.wait_for_step_completion("s-config", StepExecutionId("Route", 1), STEP_WAIT)
        assert (await client.search_flows('ActiveStepTypes = "Idle"', 10)).flows
        await client.update_flow_config(
            "s-config", dex.FlowConfig(active_step_search_mode=dex.ActiveStepSearchMode.DISABLED)
        )
        assert not (await client.search_flows('ActiveStepTypes = "Idle"', 10)).flows
        channel, stub = _stub(engine)
        async with channel:
            await stub.SetAttributes(
                pb.SetAttributesRequest(
                    flow_id="s-config",
                    attributes=[pb.AttributeWrite(key="balance", value=pb.Value(int_value=7))],
                )
            )
            got = await stub.GetAttributes(
                pb.GetAttributesRequest(flow_id="s-config", keys=["balance"])
            )
            assert [(kv.key, kv.value.int_value) for kv in got.attributes] == [("balance", 7)]
            state = await stub.GetFlowState(pb.GetFlowStateRequest(flow_id="s-config"))
            [active] = state.active_step_executions
            assert (active.step_execution_id, active.phase) == (
                "Idle-1",
                pb.ACTIVE_STEP_PHASE_WAITING,
            )
        assert await client.invoke_rpc(flow.locked_add, "s-config", 1) == 8
        await client.invoke_rpc(flow.send, "s-config", "go")
        await client.wait_for_flow("s-config", timeout=WAIT)
        # A read-only RPC may still run on the closed Flow; one with effects may not.
        assert await client.invoke_rpc(flow.peek, "s-config") == 8
        with pytest.raises(dex.FlowNotActiveOrNotFoundError):
            await client.invoke_rpc(flow.send, "s-config", "go")
