"""In-memory state of a Flow run and its Step executions, and its persisted form.

The scheduler mutates these objects only on the event loop, between awaits, and persists the run
after each change (see :mod:`dex_local_engine.store`) in one transaction that writes only what
changed: the small control state (Steps, Timers, counters, results) as a pickled snapshot, and the
Attributes and Channel messages, which can grow large in a long-lived Flow, as their own rows.
Attribute writes are tracked by key as they happen; Channel queues are compared by message
identity with what was last written. A commit serializes and writes only changed values, so its
cost does not grow with the size of the values the run holds.
"""

from __future__ import annotations

import io
import operator
import pickle
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from dex.dexpb import dex_pb2 as pb
from google.protobuf.message import Message

from dex_local_engine.store import FlowRow, StoredMessage, StoredRun, StoreError, ValueChanges

__all__ = [
    "ConditionState",
    "FlowRun",
    "MethodKind",
    "StepExecution",
    "StepPhase",
    "dump_run",
    "load_run",
    "persist_run",
]

_M = TypeVar("_M", bound=Message)

START_FROM = "__start__"
"""``from_step_execution_id`` of the start Step."""

RPC_FROM_PREFIX = "__rpc/"
"""``from_step_execution_id`` prefix of Steps an RPC started (``__rpc/<name>``)."""


class MethodKind(StrEnum):
    """Which handler of a Step an attempt runs."""

    WAIT_FOR = "wait_for"
    EXECUTE = "execute"


class StepPhase(StrEnum):
    """Where a Step execution is in its life."""

    WAIT_FOR = "wait_for"
    WAITING = "waiting"
    EXECUTE = "execute"


@dataclass
class ConditionState:
    """Progress of one Timer or Channel condition of a waiting Step."""

    completed: bool = False
    fire_at: float = 0.0
    """Timers: absolute firing time (UNIX seconds)."""
    skipped: bool = False
    values: list[pb.Value] = field(default_factory=list)
    """Channels: the consumed message values."""
    result: pb.FlowResult | None = None
    """SubFlows: the SubFlow's result once it closed."""


@dataclass
class StepExecution:
    """One Step execution (``<StepType>-<n>``)."""

    step_execution_id: str
    step_type: str
    from_step_execution_id: str
    input: pb.Value
    options: pb.StepOptions
    created_at: float
    recovery_error: pb.RecoveryErrorInfo | None = None
    phase: StepPhase = StepPhase.WAIT_FOR
    has_input: bool = True
    """False for the Flow timeout handler, whose request must carry no input."""
    attempt: int = 1
    first_attempt_at: float = 0.0
    reached_worker: bool = False
    """Some attempt of the current method produced output (it ran on a Worker)."""
    retry_at: float = 0.0
    """When a failed attempt's retry may be dispatched (0: now)."""
    last_heartbeat: pb.Value | None = None
    last_failure: pb.WorkerErrorResponse | None = None
    waiting: pb.WaitingCondition | None = None
    timers: list[ConditionState] = field(default_factory=list)
    channels: list[ConditionState] = field(default_factory=list)
    sub_flows: list[ConditionState] = field(default_factory=list)
    wait_for_failed: bool = False
    locals: dict[str, pb.Value] = field(default_factory=dict)
    method_started_at: float = 0.0
    work_started_at: float = 0.0
    """When the work this Step continues started (wall seconds): waiting for a free Worker slot,
    Steps of older work go first (see :mod:`dex_local_engine.step_dispatch_order`). 0 in a
    snapshot written before it existed: the oldest work, within the overtaking bound."""

    @property
    def method(self) -> MethodKind:
        """The handler the Step is running or will run next."""
        return MethodKind.WAIT_FOR if self.phase is StepPhase.WAIT_FOR else MethodKind.EXECUTE

    @property
    def number(self) -> int:
        """The per-Step-type execution number."""
        return int(self.step_execution_id.rsplit("-", 1)[1])


class _TrackedAttributes(dict[str, pb.Value]):
    """A run's Attributes that remember which keys changed since the last commit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.changed: set[str] = set(self)
        self.cleared = False

    def __setitem__(self, key: str, value: pb.Value) -> None:
        super().__setitem__(key, value)
        self.changed.add(key)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self.changed.add(key)

    def pop(self, key: str, *default: Any) -> Any:
        self.changed.add(key)
        return super().pop(key, *default)

    def popitem(self) -> tuple[str, pb.Value]:
        item = super().popitem()
        self.changed.add(item[0])
        return item

    def setdefault(self, key: str, default: pb.Value | None = None) -> Any:
        self.changed.add(key)
        return super().setdefault(key, default)  # type: ignore[arg-type]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> _TrackedAttributes:  # type: ignore[override,misc]
        self.update(other)
        return self

    def clear(self) -> None:
        super().clear()
        self.changed.clear()
        self.cleared = True

    def __reduce__(self) -> tuple[type[_TrackedAttributes], tuple[dict[str, pb.Value]]]:
        return type(self), (dict(self),)

    def take_changes(self) -> tuple[bool, set[str]]:
        """(cleared since the last call, keys changed since then); resets both."""
        cleared, changed = self.cleared, self.changed
        self.cleared, self.changed = False, set()
        return cleared, changed


@dataclass
class _WrittenValues:
    """What the database holds for a run's Channels, to diff the next commit against."""

    channels: dict[str, list[tuple[pb.ChannelMessage, int]]]
    """Channel name -> its written messages (the very objects) with their row sequence numbers."""
    next_seq: int


@dataclass
class FlowRun:
    """One run of a Flow."""

    flow_id: str
    run_id: str
    flow_type: str
    start_request: pb.StartFlowRequest
    config: pb.FlowConfig
    started_at: float
    status: pb.FlowStatus = pb.FLOW_STATUS_RUNNING
    closed_at: float | None = None
    error_type: pb.FlowErrorType = pb.FLOW_ERROR_TYPE_UNSPECIFIED
    error_message: str = ""
    attributes: dict[str, pb.Value] = field(default_factory=dict)
    attribute_indexes: dict[str, pb.IndexConfig] = field(default_factory=dict)
    channels: dict[str, list[pb.ChannelMessage]] = field(default_factory=dict)
    next_message_number: int = 1
    step_counts: dict[str, int] = field(default_factory=dict)
    steps: dict[str, StepExecution] = field(default_factory=dict)
    results: list[pb.StepCompletionOutput] = field(default_factory=list)
    graceful_close_pending: bool = False
    timeout_handled: bool = False
    run_attempt: int = 1
    """Attempt of the run under its Flow retry policy."""
    attempt_started_at: float = 0.0
    """When the current run attempt started (0: at ``started_at``)."""
    parent_flow_id: str = ""
    """For a SubFlow: the Flow whose Step started it."""
    next_event_id: int = 1
    request_id: str = ""
    written: _WrittenValues | None = field(default=None, repr=False, compare=False)
    """Channel rows as last committed; None: the next commit rewrites every value row."""

    def __post_init__(self) -> None:
        if not isinstance(self.attributes, _TrackedAttributes):
            self.attributes = _TrackedAttributes(self.attributes)

    def __getstate__(self) -> dict[str, Any]:
        # Attributes and Channel messages live in their own rows, not in the snapshot.
        state = dict(self.__dict__)
        state.update(attributes={}, channels={}, written=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("written", None)
        self.__post_init__()

    def has_finished(self, step_type: str, number: int) -> bool:
        """Whether Step execution ``<step_type>-<number>`` existed and has ended."""
        return (
            number <= self.step_counts.get(step_type, 0)
            and f"{step_type}-{number}" not in self.steps
        )

    @property
    def is_running(self) -> bool:
        """Whether the run is still open."""
        return bool(self.status == pb.FLOW_STATUS_RUNNING)


def _rebuild_message(type_name: str, payload: bytes) -> Message:
    message_class = getattr(pb, type_name)
    message: Message = message_class()
    message.ParseFromString(payload)
    return message


def _reduce_message(message: Message) -> tuple[Callable[[str, bytes], Message], tuple[str, bytes]]:
    return _rebuild_message, (message.DESCRIPTOR.name, message.SerializeToString())


_MESSAGE_REDUCERS: dict[type, Callable[[Message], Any]] = {
    message_class: _reduce_message
    for message_class in vars(pb).values()
    if isinstance(message_class, type) and issubclass(message_class, Message)
}
"""Every generated Dex message class -> how a snapshot carries it (as its serialized bytes)."""


class _SnapshotPickler(pickle.Pickler):
    # Generated protobuf classes cannot be pickled by reference, so messages travel as bytes.
    # A dispatch table is looked up in C by exact type; a reducer_override would be a Python
    # call for every object of the snapshot, which made up about half of a commit's pickling.
    dispatch_table = _MESSAGE_REDUCERS


def dump_run(run: FlowRun) -> bytes:
    """Serialize a run's control state (everything but Attributes and Channel messages)."""
    buffer = io.BytesIO()
    _SnapshotPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(run)
    return buffer.getvalue()


def persist_run(run: FlowRun, *, is_new: bool, search_record: bytes | None = None) -> FlowRow:
    """What to write for ``run`` now: its snapshot and the value rows changed since the last call.

    ``search_record``: for a closed run, what SearchFlows lists of it from now on.

    The caller must commit the row (or have :meth:`~dex_local_engine.store.Store.commit` roll
    back, which makes the next call rewrite every value row).

    Example::

        store.commit([persist_run(run, is_new=False)], history_rows)
    """
    attributes = run.attributes
    if not isinstance(attributes, _TrackedAttributes):
        # Replaced wholesale by a plain dict: its changes are unknown, so rewrite every row.
        attributes = run.attributes = _TrackedAttributes(attributes)
        run.written = None
    cleared, changed = attributes.take_changes()
    written = run.written
    if written is None:
        changes = ValueChanges(
            clear_all=True,
            attribute_puts=_serialized_attributes(attributes, attributes),
        )
        written = run.written = _WrittenValues({}, 1)
    else:
        changes = ValueChanges(
            clear_attributes=cleared,
            attribute_puts=_serialized_attributes(attributes, changed),
            attribute_deletes=tuple(key for key in changed if key not in attributes),
        )
    message_puts, message_deletes = _channel_changes(run.channels, written)
    changes = changes.with_messages(message_puts, message_deletes)

    def forget_written() -> None:
        run.written = None

    return FlowRow(
        run.run_id,
        run.flow_id,
        is_new,
        dump_run(run),
        changes,
        running=run.is_running,
        search_record=search_record,
        on_rollback=forget_written,
    )


def _serialized_attributes(
    attributes: Mapping[str, pb.Value], keys: Iterable[str]
) -> tuple[tuple[str, bytes], ...]:
    return tuple((key, attributes[key].SerializeToString()) for key in keys if key in attributes)


def _channel_changes(
    channels: dict[str, list[pb.ChannelMessage]], written: _WrittenValues
) -> tuple[list[StoredMessage], list[tuple[str, int]]]:
    """Rows to insert and ``(channel, seq)`` rows to delete so the database matches ``channels``.

    Messages are compared by identity: a stored message object is never changed in place, and
    the written copy keeps every written object alive, so an ``id`` is never reused meanwhile.
    """
    puts: list[StoredMessage] = []
    deletes: list[tuple[str, int]] = []
    for name in [*channels, *(name for name in written.channels if name not in channels)]:
        queue = channels.get(name, [])
        before = written.channels.get(name, [])
        if len(queue) == len(before) and all(
            map(operator.is_, queue, (message for message, _ in before))
        ):
            continue
        after = _diff_channel(name, queue, before, written, puts, deletes)
        if after:
            written.channels[name] = after
        else:
            written.channels.pop(name, None)
    return puts, deletes


def _diff_channel(
    name: str,
    queue: list[pb.ChannelMessage],
    before: list[tuple[pb.ChannelMessage, int]],
    written: _WrittenValues,
    puts: list[StoredMessage],
    deletes: list[tuple[str, int]],
) -> list[tuple[pb.ChannelMessage, int]]:
    seq_by_id = {id(message): seq for message, seq in before}
    kept_seqs = [seq_by_id.get(id(message)) for message in queue]
    retained = [seq for seq in kept_seqs if seq is not None]
    if retained != sorted(retained):
        # Reordered (the engine only appends and removes): rewrite the channel's rows.
        deletes.extend((name, seq) for _, seq in before)
        kept_seqs = [None] * len(queue)
    else:
        kept = set(retained)
        deletes.extend((name, seq) for _, seq in before if seq not in kept)
    after: list[tuple[pb.ChannelMessage, int]] = []
    for message, kept_seq in zip(queue, kept_seqs, strict=True):
        seq = kept_seq
        if seq is None:
            seq = written.next_seq
            written.next_seq += 1
            puts.append(StoredMessage(name, seq, message.SerializeToString()))
        after.append((message, seq))
    return after


def load_run(stored: StoredRun) -> FlowRun:
    """Restore a run written by :func:`persist_run` (the engine's own database only)."""
    run = pickle.loads(stored.snapshot)
    if not isinstance(run, FlowRun):
        raise StoreError("the database holds a Flow run snapshot this engine cannot read")
    if not stored.has_value_rows:
        # Written before Attributes and Channel messages had rows: the next commit writes them.
        return run
    run.attributes = _TrackedAttributes(
        (key, _parse(pb.Value, payload)) for key, payload in stored.attributes
    )
    run.attributes.take_changes()
    channels: dict[str, list[pb.ChannelMessage]] = {}
    written = _WrittenValues({}, 1)
    for row in stored.messages:
        message = _parse(pb.ChannelMessage, row.message)
        channels.setdefault(row.channel_name, []).append(message)
        written.channels.setdefault(row.channel_name, []).append((message, row.seq))
        written.next_seq = max(written.next_seq, row.seq + 1)
    run.channels = channels
    run.written = written
    return run


def _parse(message_class: type[_M], payload: bytes) -> _M:
    message = message_class()
    message.ParseFromString(payload)
    return message
