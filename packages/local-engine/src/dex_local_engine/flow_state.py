"""In-memory state of a Flow run and its Step executions, and its persisted snapshot form.

The scheduler mutates these objects only on the event loop, between awaits, and persists the
whole run as one snapshot after each change (see :mod:`dex_local_engine.store`).
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from dex.dexpb import dex_pb2 as pb
from google.protobuf.message import Message

__all__ = [
    "ConditionState",
    "FlowRun",
    "MethodKind",
    "StepExecution",
    "StepPhase",
    "dump_run",
    "load_run",
]

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

    @property
    def method(self) -> MethodKind:
        """The handler the Step is running or will run next."""
        return MethodKind.WAIT_FOR if self.phase is StepPhase.WAIT_FOR else MethodKind.EXECUTE

    @property
    def number(self) -> int:
        """The per-Step-type execution number."""
        return int(self.step_execution_id.rsplit("-", 1)[1])


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


class _SnapshotPickler(pickle.Pickler):
    # Generated protobuf classes cannot be pickled by reference, so messages travel as bytes.
    def reducer_override(self, obj: object) -> Any:
        if isinstance(obj, Message):
            return _rebuild_message, (obj.DESCRIPTOR.name, obj.SerializeToString())
        return NotImplemented


def dump_run(run: FlowRun) -> bytes:
    """Serialize a run for :class:`~dex_local_engine.store.FlowRow`."""
    buffer = io.BytesIO()
    _SnapshotPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(run)
    return buffer.getvalue()


def load_run(snapshot: bytes) -> FlowRun:
    """Restore a run written by :func:`dump_run` (the engine's own database only)."""
    run = pickle.loads(snapshot)
    if not isinstance(run, FlowRun):
        raise TypeError("snapshot is not a Flow run")
    return run
