"""Incremental persistence: a commit writes the run's small snapshot plus only the Attribute and
Channel message rows that changed, and a Flow with a large state survives SIGKILL intact."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import dex
import pytest
from dex import (
    Attribute,
    AttributeMap,
    Channel,
    ChannelMap,
    Flow,
    FlowStatus,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepExecutionId,
    StepList,
    StepOptions,
    Wait,
    go_to,
    graceful_complete,
    rpc,
)
from dex.dexpb import dex_pb2 as pb
from dex_local_engine.flow_state import FlowRun, dump_run, load_run, persist_run
from dex_local_engine.store import Durability, FlowRow, HistoryRow, Store
from engine_kernel_harness import reachable, running_engine, sdk_client, sdk_worker

WAIT = timedelta(seconds=60)
STEP_WAIT = dex.WaitForStepCompletionOptions()
_NOTE_BYTES = 64 * 1024
_NOTES = 16


# --------------------------------------------------------------------------- store level


def _text(value: str) -> pb.Value:
    return pb.Value(string_value=value)


def _message(channel: str, text: str) -> pb.ChannelMessage:
    return pb.ChannelMessage(channel_name=channel, value=_text(text), message_id=text)


def _new_run() -> FlowRun:
    return FlowRun(
        flow_id="flow-1",
        run_id="run-1",
        flow_type="BulkStateFlow",
        start_request=pb.StartFlowRequest(flow_id="flow-1"),
        config=pb.FlowConfig(),
        started_at=1.0,
    )


def _reload(store: Store) -> FlowRun:
    (stored,) = list(store.load_flows())
    return load_run(stored)


def _state(run: FlowRun) -> tuple[dict[str, str], dict[str, list[str]]]:
    attributes = {key: value.string_value for key, value in run.attributes.items()}
    channels = {
        name: [message.message_id for message in queue] for name, queue in run.channels.items()
    }
    return attributes, channels


def test_a_commit_writes_only_the_changed_values_and_a_reload_matches(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "engine.db", Durability.PROCESS_CRASH_SAFE)
    run = _new_run()
    for number in range(50):
        run.attributes[f"note-{number}"] = _text("x" * 1000 + str(number))
    run.channels["inbox"] = [_message("inbox", "m1"), _message("inbox", "m2")]
    first = persist_run(run, is_new=True)
    assert first.values.clear_all and len(first.values.attribute_puts) == 50
    store.commit([first], [])

    run.attributes["note-3"] = _text("changed")
    run.attributes.pop("note-4")
    del run.channels["inbox"][0]
    run.channels["inbox"].append(_message("inbox", "m3"))
    run.channels.setdefault("other", []).append(_message("other", "o1"))
    second = persist_run(run, is_new=False)
    assert not second.values.clear_all
    assert [key for key, _ in second.values.attribute_puts] == ["note-3"]
    assert second.values.attribute_deletes == ("note-4",)
    assert len(second.values.message_deletes) == 1
    assert [row.channel_name for row in second.values.message_puts] == ["inbox", "other"]
    assert len(second.snapshot) < 2000, "the snapshot must not carry the Attributes"
    store.commit([second], [])

    unchanged = persist_run(run, is_new=False)
    assert unchanged.values.attribute_puts == () and unchanged.values.message_puts == ()
    store.commit([unchanged], [])

    reloaded = _reload(store)
    assert _state(reloaded) == _state(run)
    assert reloaded.attributes["note-3"].string_value == "changed"
    assert _state(reloaded)[1] == {"inbox": ["m2", "m3"], "other": ["o1"]}

    # After a restart the reloaded run keeps committing incrementally.
    reloaded.channels["inbox"].pop(0)
    reloaded.attributes.clear()
    reloaded.attributes["fresh"] = _text("new")
    third = persist_run(reloaded, is_new=False)
    assert third.values.clear_attributes and not third.values.clear_all
    assert [key for key, _ in third.values.attribute_puts] == ["fresh"]
    store.commit([third], [])
    assert _state(_reload(store)) == ({"fresh": "new"}, {"inbox": ["m3"], "other": ["o1"]})
    store.close()


def test_a_failed_commit_makes_the_next_commit_rewrite_every_value(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "engine.db", Durability.PROCESS_CRASH_SAFE)
    run = _new_run()
    run.attributes["a"] = _text("1")
    store.commit([persist_run(run, is_new=True)], [])
    run.attributes["b"] = _text("2")
    # Two history rows with one event ID violate the primary key: the commit rolls back.
    duplicate_history = [HistoryRow("run-1", 1, b""), HistoryRow("run-1", 1, b"")]
    with pytest.raises(sqlite3.IntegrityError):
        store.commit([persist_run(run, is_new=False)], duplicate_history)
    retry = persist_run(run, is_new=False)
    assert retry.values.clear_all
    store.commit([retry], [])
    assert _state(_reload(store))[0] == {"a": "1", "b": "2"}
    store.close()


def test_a_snapshot_that_still_holds_its_values_loads_and_moves_them_to_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store.open(tmp_path / "engine.db", Durability.PROCESS_CRASH_SAFE)
    run = _new_run()
    run.attributes["kept"] = _text("old")
    run.channels["inbox"] = [_message("inbox", "m1")]
    # The earlier format pickled the whole run, values included, and wrote no value rows.
    monkeypatch.setattr(FlowRun, "__getstate__", lambda self: dict(self.__dict__, written=None))
    store.commit([FlowRow(run.run_id, run.flow_id, True, dump_run(run))], [])
    monkeypatch.undo()

    reloaded = _reload(store)
    assert _state(reloaded) == ({"kept": "old"}, {"inbox": ["m1"]})
    upgrade = persist_run(reloaded, is_new=False)
    assert upgrade.values.clear_all and len(upgrade.values.message_puts) == 1
    store.commit([upgrade], [])
    assert _state(_reload(store)) == ({"kept": "old"}, {"inbox": ["m1"]})
    store.close()


# --------------------------------------------------------------------------- over the wire


class Fill(Step[str]):
    """Writes ~1 MiB of notes, then starts the turns."""

    def __init__(self, flow: BulkStateFlow) -> None:
        self.flow = flow

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        for number in range(_NOTES):
            self.flow.notes.set(context, f"note-{number}", str(number % 10) * _NOTE_BYTES)
        self.flow.turns.set(context, 0)
        return go_to(Turn, "")


class Turn(Step[str]):
    """Takes one inbox message per turn; each turn rewrites one note and drops note-0."""

    def __init__(self, flow: BulkStateFlow) -> None:
        self.flow = flow

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_load_attribute_maps=(self.flow.notes,),
            execute_load_channel_maps=(self.flow.backlog,),
        )

    async def wait_for(self, context: dex.AsyncContext, input: str) -> Wait:
        return Wait.until(self.flow.inbox.for_one())

    async def execute(self, context: dex.AsyncContext, input: str) -> StepDecision:
        (text,) = self.flow.inbox.results(context)
        turns = self.flow.turns.get(context) + 1
        self.flow.turns.set(context, turns)
        if text != "done":
            self.flow.notes.set(context, f"note-{turns}", f"turn-{turns}:{text}:" + "y" * 1000)
            self.flow.notes.delete(context, "note-0")
            return go_to(Turn, "")
        notes = {
            key: self.flow.notes.get(context, key)
            for key in self.flow.notes.get_all_instance_keys(context)
        }
        summary = sorted((key, len(value), value[:12]) for key, value in notes.items())
        backlog = [message.value for message in self.flow.backlog.pending_messages(context, "b")]
        return graceful_complete(f"turns={turns} notes={summary} backlog={backlog}")


class BulkStateFlow(Flow[str]):
    def __init__(self) -> None:
        self.inbox = Channel("inbox", str)
        self.backlog = ChannelMap("backlog", str)
        self.notes = AttributeMap("notes", str)
        self.turns = Attribute("turns", int)

    def get_flow_type(self) -> str:
        return "BulkStateFlow"

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Fill(self)).other_steps(Turn(self))

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.inbox, self.backlog, self.notes, self.turns)

    @rpc
    async def send(self, context: dex.Context, text: str) -> RPCResult[str]:
        self.inbox.publish(context, text)
        return RPCResult("sent")

    @rpc
    async def park(self, context: dex.Context, text: str) -> RPCResult[str]:
        self.backlog.publish(context, "b", text)
        return RPCResult("parked")


async def test_a_flow_with_a_large_state_survives_sigkill_and_restart() -> None:
    flow = BulkStateFlow()
    async with running_engine() as engine:
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await client.start_flow(flow, "bulk", "")
            for number, text in enumerate(("first", "second"), start=1):
                await client.invoke_rpc(flow.send, "bulk", text)
                step = StepExecutionId("Turn", number)
                await client.wait_for_step_completion("bulk", step, STEP_WAIT)
            for text in ("p1", "p2"):
                assert await client.invoke_rpc(flow.park, "bulk", text) == "parked"
        engine.kill()
        engine.start()
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await reachable(client)
            await client.invoke_rpc(flow.send, "bulk", "done")
            result = await client.wait_for_flow("bulk", timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED
    expected_notes = sorted(
        [(f"note-{n}", _NOTE_BYTES, str(n % 10) * 12) for n in range(3, _NOTES)]
        + [
            ("note-1", len("turn-1:first:") + 1000, "turn-1:first"),
            ("note-2", len("turn-2:second:") + 1000, "turn-2:secon"),
        ]
    )
    assert result.completions[0].decode(str) == (
        f"turns=3 notes={expected_notes} backlog={['p1', 'p2']}"
    )
