"""The order in which Steps waiting for a free Worker slot get one (issue 33): oldest work first.

A real engine process, the real SDK client and a real SDK Worker (in this process) with one Step
slot (two task slots, one kept for RPCs). ``TurnFlow`` has the shape of an agent session's turn:
``Begin`` moves to ``AwaitAnswer`` (it waits for a person's answer, published by the ``answer``
RPC) and ``Join`` (it waits for ``Act``'s result, like a turn waiting for its tool results);
the answer moves to ``Act``, which publishes ``done`` and so lets ``Join`` end the run. A run whose
label starts with ``loop`` runs three ``Loop`` chains instead until the ``stop`` RPC: work under
way that never ends, with one of its Steps always waiting for the slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
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
from engine_kernel_harness import running_engine, sdk_client, sdk_worker

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

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
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

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        self.flow.board.ran.append(("AwaitAnswer.wait_for", input))
        return Wait.until(self.flow.answers.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        self.flow.board.ran.append(("AwaitAnswer", input))
        return go_to(Act, input)


class Act(Step[str]):
    def __init__(self, flow: TurnFlow) -> None:
        self.flow = flow

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        self.flow.board.ran.append(("Act", input))
        self.flow.done.publish(context, input)
        return dex.dead_end()


class Join(Step[str]):
    def __init__(self, flow: TurnFlow) -> None:
        self.flow = flow

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        self.flow.board.ran.append(("Join.wait_for", input))
        return Wait.until(self.flow.done.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        self.flow.board.ran.append(("Join", input))
        return force_complete(input)


class Loop(Step[str]):
    def __init__(self, flow: TurnFlow) -> None:
        self.flow = flow

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
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
    async def answer(self, context: dex.Context, text: str) -> RPCResult[bool]:
        self.answers.publish(context, text)
        return RPCResult(True)

    @rpc
    async def stop(self, context: dex.Context) -> RPCResult[bool]:
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
    # The resumed run's work started first: its answered Step and the Step that follows it ran
    # before the first Step of either run started later, though those waited longer.
    assert board.index("Act", "resumed") < board.index("Begin", "new-1")
    assert board.index("Act", "resumed") < board.index("Begin", "new-2")
    # Among the new runs, the older one first.
    assert board.index("Begin", "new-1") < board.index("Begin", "new-2")
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
