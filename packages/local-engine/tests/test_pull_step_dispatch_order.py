"""The order in which Steps waiting for a free Worker slot get one (issue 33): oldest work first.

A real engine process, the real SDK client and a real SDK Worker (in this process) with one Step
slot (two task slots, one kept for RPCs). ``TurnFlow`` has the shape of an agent session's turn:
``Begin`` moves to ``AwaitAnswer`` (it waits for a person's answer, published by the ``answer``
RPC) and ``Join`` (it waits for ``Act``'s result, like a turn waiting for its tool results);
the answer moves to ``Act``, which publishes ``done`` and so lets ``Join`` end the run. A run whose
label starts with ``loop`` runs three ``Loop`` chains instead until the ``stop`` RPC: work under
way that never ends, with one of its Steps always waiting for the slot. The registry cases at
the end drive :class:`PullWorkerRegistry` alone with a test wall clock, so the order and its
bound are exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta

import dex
import pytest
from dex import (
    Attribute,
    Channel,
    Flow,
    FlowStatus,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    Wait,
    force_complete,
    go_to,
    go_to_many,
    rpc,
)
from dex.dexpb import dex_pb2 as pb
from dex_local_engine.dispatch import DispatchTask
from dex_local_engine.pull_worker_registry import Assignment, Exclusions, PullWorkerRegistry
from dex_local_engine.step_dispatch_order import RESUMED_WORK_STARTED_AT, StepDispatchOrder
from engine_kernel_harness import running_engine, sdk_client, sdk_worker
from engine_test_support import execute_task, string_value

WAIT = timedelta(seconds=60)
_STEP_AND_RPC_SLOTS = 2
"""Task slots of the Worker: one for Steps, one kept for RPCs (the SDK's reserve)."""
_LOOP_CHAINS = 3
_LOOP_STEP_SECONDS = 0.05


@dataclass
class _Board:
    """What the Worker ran, in order, and the blocker the test releases (same process)."""

    ran: list[tuple[str, str]] = field(default_factory=list)
    release_blocker: asyncio.Event = field(default_factory=asyncio.Event)

    def index(self, step: str, label: str) -> int:
        return self.ran.index((step, label))

    async def wait_ran(self, step: str, label: str, count: int = 1) -> None:
        async with asyncio.timeout(WAIT.total_seconds()):
            while self.ran.count((step, label)) < count:
                await asyncio.sleep(0.01)


class Begin(Step[str]):
    def __init__(self, board: _Board) -> None:
        self.board = board

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        self.board.ran.append(("Begin", input))
        if input == "blocker":
            # Holds the only Step slot until the test lets go.
            await self.board.release_blocker.wait()
        if input.startswith("loop"):
            return go_to_many(*(StepMovement.of(Loop, input) for _ in range(_LOOP_CHAINS)))
        return go_to_many(StepMovement.of(AwaitAnswer, input), StepMovement.of(Join, input))


class AwaitAnswer(Step[str]):
    def __init__(self, flow: TurnFlow) -> None:
        self.flow = flow

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:  # type: ignore[override]
        self.flow.board.ran.append(("AwaitAnswer.wait_for", input))
        return Wait.until(self.flow.answers.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        self.flow.board.ran.append(("AwaitAnswer", input))
        return go_to(Act, input)


class Act(Step[str]):
    def __init__(self, flow: TurnFlow) -> None:
        self.flow = flow

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        self.flow.board.ran.append(("Act", input))
        self.flow.done.publish(context, input)
        return dex.dead_end()


class Join(Step[str]):
    def __init__(self, flow: TurnFlow) -> None:
        self.flow = flow

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:  # type: ignore[override]
        self.flow.board.ran.append(("Join.wait_for", input))
        return Wait.until(self.flow.done.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        self.flow.board.ran.append(("Join", input))
        return force_complete(input)


class Loop(Step[str]):
    def __init__(self, flow: TurnFlow) -> None:
        self.flow = flow

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        self.flow.board.ran.append(("Loop", input))
        # Long enough for the other chains' next Steps to be waiting when it frees the slot.
        await asyncio.sleep(_LOOP_STEP_SECONDS)
        if self.flow.stopped.get(context):
            return force_complete(input)
        return go_to(Loop, input)


class TurnFlow(Flow[str]):
    def __init__(self, board: _Board) -> None:
        self.board = board
        self.answers = Channel("answers", str)
        self.done = Channel("done", str)
        self.stopped = Attribute("stopped", bool)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Begin(self.board)).other_steps(
            AwaitAnswer(self), Act(self), Join(self), Loop(self)
        )

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.answers, self.done, self.stopped)

    @rpc
    def answer(self, context: dex.Context, text: str) -> RPCResult[bool]:
        self.answers.publish(context, text)
        return RPCResult(True)

    @rpc
    def stop(self, context: dex.Context) -> RPCResult[bool]:
        self.stopped.set(context, True)
        return RPCResult(True)


@dataclass(frozen=True)
class _Served:
    flow: TurnFlow
    board: _Board
    client: dex.AsyncClient

    async def start(self, label: str) -> None:
        await self.client.start_flow(self.flow, label, label)

    async def completed(self, label: str) -> str:
        result = await self.client.wait_for_flow(label, timeout=WAIT)
        assert result.status is FlowStatus.COMPLETED, result.error_message
        return str(result.completions[-1].decode(str))


@asynccontextmanager
async def _serving(*engine_args: str) -> AsyncIterator[_Served]:
    board = _Board()
    flow = TurnFlow(board)
    async with (
        running_engine(*engine_args) as engine,
        sdk_worker(engine, [flow], task_slots=_STEP_AND_RPC_SLOTS),
        sdk_client(engine, [flow]) as client,
    ):
        yield _Served(flow, board, client)


@pytest.fixture
async def served() -> AsyncIterator[_Served]:
    async with _serving() as value:
        yield value


async def _settle() -> None:
    """Give the engine time to queue what it was just asked (not an assertion on timing: a task
    queued late would only make the order the plain arrival order this test tells apart)."""
    await asyncio.sleep(0.5)


async def test_a_run_resumed_by_an_answer_is_served_before_runs_that_started_later(
    served: _Served,
) -> None:
    board = served.board
    await served.start("resumed")
    await board.wait_ran("Join.wait_for", "resumed")
    await board.wait_ran("AwaitAnswer.wait_for", "resumed")
    await served.start("blocker")
    await board.wait_ran("Begin", "blocker")
    # The only Step slot is taken: the new runs' first Steps wait for it, then the answer
    # readies the resumed run's Step, which waits behind them in arrival order.
    await served.start("new-1")
    await served.start("new-2")
    await _settle()
    assert await served.client.invoke_rpc(served.flow.answer, "resumed", "yes")
    await _settle()
    assert ("Begin", "new-1") not in board.ran

    board.release_blocker.set()

    assert await served.completed("resumed") == "resumed"
    for label in ("new-1", "new-2"):
        await board.wait_ran("AwaitAnswer.wait_for", label)
    # The resumed run's work started first: its answered Step ran before the first Step of the
    # runs started later, though those waited longer; in arrival order it would run after both.
    # (Not ``Act``, the Step after it: a freed slot goes to the oldest work waiting at that
    # moment, and ``Act`` waits only once the engine has committed ``AwaitAnswer``'s result,
    # which may be after the slot was given.) Only one of the two is checked: the engine offers
    # the waiting Steps oldest first, but while it probes whether the Worker has a free slot
    # again it may offer the two oldest at once, on the Worker's two streams, and the Worker
    # takes whichever it reads first (a fresh-clone CI run saw new-1's first Step win that race
    # once). The registry cases below check the order of the offers exactly.
    resumed = board.index("AwaitAnswer", "resumed")
    assert resumed < max(board.index("Begin", "new-1"), board.index("Begin", "new-2")), board.ran
    for label in ("blocker", "new-1", "new-2"):
        assert await served.client.invoke_rpc(served.flow.answer, label, "yes")
        assert await served.completed(label) == label


async def test_a_new_run_is_served_while_older_work_keeps_a_step_waiting() -> None:
    # Older work that never ends would keep a new run's Step waiting for ever if the oldest work
    # always went first; after waiting more than the bound (1 s here), the new run goes first.
    async with _serving("--max-overtake-seconds", "1") as served:
        board = served.board
        await served.start("loop")
        await board.wait_ran("Loop", "loop", count=10)
        await served.start("new")

        await board.wait_ran("Begin", "new")

        # The loop's work went on around it: it was served while older work kept waiting.
        loops_before_new = board.ran[: board.index("Begin", "new")].count(("Loop", "loop"))
        await board.wait_ran("Loop", "loop", count=loops_before_new + 2)
        assert await served.client.invoke_rpc(served.flow.stop, "loop")
        assert await served.completed("loop") == "loop"
        await board.wait_ran("AwaitAnswer.wait_for", "new")


# The registry alone, with a test wall clock --------------------------------------------------


class _WallClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _OneStream:
    """A registry with a test wall clock and one Worker stream, so tasks take it one at a time."""

    def __init__(self, max_overtake_seconds: float) -> None:
        self.wall = _WallClock()
        self.registry = PullWorkerRegistry(
            step_order=StepDispatchOrder(max_overtake_seconds), wall_clock=self.wall
        )
        self.stream = self.registry.add_stream(
            pb.PollWorkerTaskRegister(queue=_FLOW, app_worker_id="w", flow_types=[_FLOW])
        )
        self.acquiring: dict[str, asyncio.Task[Assignment]] = {}

    async def want(self, label: str, work_started_at: float | None) -> DispatchTask:
        task = replace(
            execute_task(_FLOW, "Step", string_value(label)), work_started_at=work_started_at
        )
        self.acquiring[label] = asyncio.ensure_future(self.registry.acquire(task, Exclusions()))
        await _turns()
        return task

    async def served_in_order(self) -> list[str]:
        """Finish the stream's task again and again; the labels in the order they got it."""
        order = []
        while (assignment := self.stream.assignment) is not None:
            request = assignment.task.request
            assert isinstance(request, pb.InvokeExecuteMethodRequest)
            order.append(request.step_input.string_value)
            result = pb.InvokeExecuteMethodOutput(result=pb.InvokeExecuteMethodResponse())
            frame = pb.PollWorkerTaskFrame(task_id=assignment.task.task_id, execute=result)
            self.registry.on_task_frame(self.stream, frame)
            await _turns()
        return order


_FLOW = "Flow"


async def _turns() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_waiting_steps_are_offered_oldest_work_first_and_rpcs_before_them() -> None:
    one = _OneStream(max_overtake_seconds=30.0)
    await one.want("running", work_started_at=1000.0)
    await one.want("new work", work_started_at=1000.0)
    one.wall.now += 1
    await one.want("work under way", work_started_at=990.0)
    await one.want("resumed", work_started_at=RESUMED_WORK_STARTED_AT)
    await one.want("in arrival order", work_started_at=None)

    assert await one.served_in_order() == [
        "running",
        "resumed",  # as old as the bound allows: 1001 - 30
        "work under way",
        "new work",
        "in arrival order",  # 1001
    ]


async def test_no_step_is_served_before_one_that_started_waiting_beyond_the_bound_earlier() -> None:
    one = _OneStream(max_overtake_seconds=5.0)
    await one.want("running", work_started_at=None)
    await one.want("new run", work_started_at=1000.0)
    one.wall.now += 4
    await one.want("older work, 4 s later", work_started_at=900.0)
    one.wall.now += 2
    await one.want("resumed, 6 s later", work_started_at=RESUMED_WORK_STARTED_AT)

    assert await one.served_in_order() == [
        "running",
        "older work, 4 s later",  # 900, but not before 1004 - 5 = 999
        "new run",  # 1000
        "resumed, 6 s later",  # 1006 - 5 = 1001: it started waiting more than 5 s after
    ]


async def test_a_step_waiting_again_after_a_decline_keeps_its_place() -> None:
    one = _OneStream(max_overtake_seconds=0.0)  # arrival order
    await one.want("running", work_started_at=None)
    one.wall.now += 1
    await one.want("later", work_started_at=None)
    # The dispatcher passes the moment the task first waited when it waits again after a decline.
    declined = execute_task(_FLOW, "Step", string_value("declined"))
    one.acquiring["declined"] = asyncio.ensure_future(
        one.registry.acquire(declined, Exclusions(), one.wall.now - 1)
    )
    await _turns()

    assert await one.served_in_order() == ["running", "declined", "later"]
