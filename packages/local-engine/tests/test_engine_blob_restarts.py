"""Large values are blobs in SQLite, committed with what refers to them, so restarts lose none.

The engine runs as a real process that the tests SIGKILL; after each kill the database itself is
checked (every stored reference names a stored blob) and a fresh Worker, whose blob cache is
empty, loads every value from the restarted engine: no attempt beyond those the kills lost.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import dex
from dex import (
    Attribute,
    Channel,
    Flow,
    FlowStatus,
    PersistenceSchema,
    RPCResult,
    Step,
    StepList,
    StepOptions,
    Wait,
    rpc,
)
from dex.dexpb import dex_pb2 as pb
from dex_local_engine.blob_values import BLOB_THRESHOLD_BYTES, blob_reference_id, blob_references
from dex_local_engine.flow_state import load_run
from dex_local_engine.store import StoredRun
from engine_kernel_harness import EngineProcess, reachable, running_engine, sdk_client, sdk_worker
from google.protobuf.message import Message

WAIT = timedelta(seconds=60)
KIB = 1024
_NOTE_CHARS = 1024 * KIB
_INBOX_CHARS = 600 * KIB
_INPUT_CHARS = 300 * KIB
_RELEASE_CHARS = 500 * KIB
_KILLS = 3
_FILLS_PER_KILL = 25
_FILL_PAUSE_SECONDS = 0.02


class Hold(Step[str]):
    """Waits for ``go``, then reports what it loaded (sizes and the attempt that loaded them)."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_load_channels=(BlobFlow.inbox,))

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(BlobFlow.go.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        inbox = [message.value for message in BlobFlow.inbox.pending_messages(context)]
        (released,) = BlobFlow.go.results(context)
        note = BlobFlow.note.get(context) or ""
        seeds = sorted(int(text.split(":", 1)[0]) for text in inbox)
        sizes = {len(text) - len(text.split(":", 1)[0]) - 1 for text in inbox}
        return dex.force_complete(
            f"attempt={context.attempt} input={len(input)} released={len(released)} "
            f"note={len(note) - len(note.split(':', 1)[0]) - 1} inbox={seeds} sizes={sorted(sizes)}"
        )


class BlobFlow(Flow[str]):
    inbox = Channel("inbox", str)
    go = Channel("go", str)
    note = Attribute("note", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Hold())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.inbox, self.go, self.note)

    @rpc
    async def fill(self, context: dex.Context, seed: int) -> RPCResult[int]:
        """A new 1 MiB note and a 600 KiB inbox message, both unique to ``seed``."""
        self.note.set(context, f"{seed}:" + "n" * _NOTE_CHARS)
        self.inbox.publish(context, f"{seed}:" + chr(ord("a") + seed % 26) * _INBOX_CHARS)
        return RPCResult(seed)

    @rpc
    async def release(self, context: dex.Context) -> RPCResult[bool]:
        self.go.publish(context, "g" * _RELEASE_CHARS)
        return RPCResult(True)


def _stored_references(database: Path) -> tuple[list[str], set[str], int]:
    """(blob IDs every stored row and event refers to, stored blob IDs, largest value row)."""
    db = sqlite3.connect(database)
    try:
        referring: list[Message] = []
        for (value,) in db.execute("SELECT value FROM attributes"):
            referring.append(pb.Value.FromString(value))
        for (message,) in db.execute("SELECT message FROM channel_messages"):
            referring.append(pb.ChannelMessage.FromString(message))
        for (event,) in db.execute("SELECT event FROM history"):
            referring.append(pb.FlowHistoryEvent.FromString(event))
        for (snapshot,) in db.execute("SELECT snapshot FROM flows"):
            run = load_run(StoredRun("run", "flow", True, snapshot))
            referring.append(run.start_request)
            referring.extend(step.input for step in run.steps.values())
        references = [
            blob_reference_id(value) for message in referring for value in blob_references(message)
        ]
        stored = {blob_id for (blob_id,) in db.execute("SELECT blob_id FROM blobs")}
        (largest,) = db.execute(
            "SELECT max(max_value) FROM (SELECT max(length(value)) AS max_value FROM attributes "
            "UNION ALL SELECT max(length(message)) FROM channel_messages)"
        ).fetchone()
        return references, stored, int(largest or 0)
    finally:
        db.close()


def _assert_every_reference_resolves(database: Path) -> int:
    references, stored, largest = _stored_references(database)
    missing = sorted(set(references) - stored)
    assert not missing, f"stored references name blobs the database lacks: {missing}"
    assert largest < BLOB_THRESHOLD_BYTES, f"a value row holds {largest} bytes inline"
    return len(set(references))


async def _release_and_report(engine: EngineProcess, flow: BlobFlow, flow_id: str) -> str:
    """With a fresh Worker (empty blob cache) on the restarted engine, run the Step to its end."""
    async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
        await reachable(client)
        await client.invoke_rpc(flow.release, flow_id)
        result = await client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED
    return str(result.completions[0].decode(str))


async def test_values_stored_as_blobs_load_after_sigkill_at_the_first_attempt() -> None:
    flow = BlobFlow()
    async with running_engine() as engine:
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await client.start_flow(flow, "blobs", "i" * _INPUT_CHARS)
            for seed in (1, 2):
                assert await client.invoke_rpc(flow.fill, "blobs", seed) == seed
        engine.kill()
        # The value rows hold references; the blobs they name are in the same database.
        assert _assert_every_reference_resolves(engine.database) >= 4
        engine.start()
        report = await _release_and_report(engine, flow, "blobs")
    assert report == (
        f"attempt=1 input={_INPUT_CHARS} released={_RELEASE_CHARS} note={_NOTE_CHARS} "
        f"inbox=[1, 2] sizes=[{_INBOX_CHARS}]"
    )


async def test_sigkill_while_large_values_are_written_leaves_no_dangling_reference() -> None:
    flow = BlobFlow()
    rng = random.Random(19)
    acknowledged: list[int] = []
    seeds = iter(range(1, 10_000))
    async with running_engine() as engine:
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await client.start_flow(flow, "churn", "i" * _INPUT_CHARS)
        for kill in range(_KILLS):
            async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
                await reachable(client)
                writer = asyncio.create_task(_fill_until_killed(client, flow, seeds, acknowledged))
                await asyncio.sleep(rng.uniform(0.3, 1.2))
                engine.kill()
                await writer
            _assert_every_reference_resolves(engine.database)
            engine.start()
            assert acknowledged, f"kill {kill + 1}: no fill was acknowledged before the kill"
        report = await _release_and_report(engine, flow, "churn")
    prefix, inbox = report.split(" inbox=")
    attempt_field, sizes = prefix.split(" ", 1)
    assert sizes == f"input={_INPUT_CHARS} released={_RELEASE_CHARS} note={_NOTE_CHARS}"
    # A kill that lands while the Step's WaitFor is on the Worker fails that attempt as lost
    # (Engine.recover), so each kill may add one attempt; a dangling blob would add more.
    attempt = int(attempt_field.removeprefix("attempt="))
    assert 1 <= attempt <= 1 + _KILLS, report
    stored = [int(seed) for seed in inbox.split("]")[0].strip("[").split(", ")]
    # Every acknowledged write is there; at most the one in flight at each kill was added too.
    assert set(acknowledged) <= set(stored)
    assert len(stored) <= len(acknowledged) + _KILLS
    assert inbox.endswith(f"sizes=[{_INBOX_CHARS}]")


async def _fill_until_killed(
    client: dex.AsyncClient, flow: BlobFlow, seeds: Iterator[int], acknowledged: list[int]
) -> None:
    """Fills, paced, until the engine is killed or ``_FILLS_PER_KILL`` were sent.

    The Step finally loads every inbox message into one Worker's 64 MiB blob cache, so the fills
    are paced and capped (``_FILLS_PER_KILL``) to keep it well under that however fast the machine:
    unpaced, a fast run acknowledged over 100 fills (more than 64 MiB), and the Step could never
    load its values.
    """
    for _ in range(_FILLS_PER_KILL):
        seed = next(seeds)
        try:
            acknowledged.append(await client.invoke_rpc(flow.fill, "churn", seed))
        except dex.DexServiceError:
            return
        await asyncio.sleep(_FILL_PAUSE_SECONDS)
