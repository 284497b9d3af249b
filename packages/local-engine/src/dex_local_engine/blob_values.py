"""Large values travel to Workers as blob references, loaded with ``LoadBlobs``.

Every SDK channel keeps gRPC's 4 MiB receive limit, so a task carrying its loaded values inline
could never reach a Worker once they pass 4 MiB together. Dex's answer is the blob reference: a
``Value`` whose kind is ``internal_blob_id_for_string_value`` or ``internal_blob_id_for_obj_value``.
The SDK's value hydrators resolve such references through ``FlowService.LoadBlobs`` (one call per
task, for the references its blob cache does not hold) before the handler runs.

The engine sends every string or object value over :data:`BLOB_THRESHOLD_BYTES` as a reference,
and, when a task would still exceed :data:`TASK_INLINE_BUDGET_BYTES`, the largest remaining values
too. A blob's ID is the SHA-256 of the value, so the same value keeps its ID across tasks and a
Worker's blob cache serves it after the first load.

``LoadBlobs`` answers at most :data:`LOAD_BLOBS_PAGE_BYTES` of values, in request order. When a
task refers to more than that, the SDK caches the values it received, then fails the attempt
naming the first omitted blob; the engine recognises that failure
(:meth:`BlobStore.is_paging_failure`) and dispatches the same attempt again (no retry used), so
each round loads the next page until the Worker's cache holds them all.

A single value can never exceed what one ``LoadBlobs`` response can carry to an SDK channel, so
the per-value limit stays just under 4 MiB (:data:`dex_local_engine.value_limits.MAX_VALUE_BYTES`).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterator

import grpc
from dex.dexpb import dex_pb2 as pb

from dex_local_engine import errors
from dex_local_engine.dispatch import TaskRequest

__all__ = [
    "BLOB_THRESHOLD_BYTES",
    "LOAD_BLOBS_PAGE_BYTES",
    "TASK_INLINE_BUDGET_BYTES",
    "BlobStore",
]

BLOB_THRESHOLD_BYTES = 256 * 1024
"""String and object values larger than this always travel as blob references."""

TASK_INLINE_BUDGET_BYTES = 3 * 1024 * 1024
"""A task larger than this has its largest values sent as blob references until it fits."""

LOAD_BLOBS_PAGE_BYTES = 3 * 1024 * 1024 + 512 * 1024
"""Largest ``LoadBlobs`` response (a single larger value is still sent alone)."""

_DEFAULT_MEMORY_BYTES = 512 * 1024 * 1024
_OMITTED_MEMORY = 4096
_MAX_OMISSIONS = 16
"""After a blob was left out this often, a Worker is not keeping its pages (a blob cache smaller
than the task's values): its failure is an ordinary attempt failure, so retries end."""


def _task_values(request: TaskRequest) -> Iterator[pb.Value]:
    """The values of ``request`` that the SDK hydrates (so they may be references)."""
    if isinstance(request, pb.InvokeWorkerRPCRequest):
        yield request.input
    else:
        yield request.step_input
        if request.context.HasField("last_heartbeat_value"):
            yield request.context.last_heartbeat_value
    for entry in request.attributes:
        yield entry.value
    for channel_values in request.loaded_channel_messages.values():
        for message in channel_values.messages:
            yield message.value
    if isinstance(request, pb.InvokeExecuteMethodRequest):
        for entry in request.step_exe_locals:
            yield entry.value
        for channel_result in request.condition_results.channel_results:
            yield from channel_result.values
        for flow_result in request.condition_results.sub_flow_results:
            for completion in flow_result.results:
                yield completion.completed_step_output


def _blob_kind(value: pb.Value) -> str | None:
    kind = value.WhichOneof("kind")
    return kind if kind in ("string_value", "obj_value") else None


class BlobStore:
    """The blobs the engine referred to, by ID, so ``LoadBlobs`` can answer for them.

    Held in memory (bounded, least recently referred first out): a task built after an engine
    restart refers to its blobs again.

    Example::

        blobs = BlobStore()
        blobs.externalize(request)            # large values become references
        response = blobs.load(load_request)   # what a Worker's LoadBlobs gets
    """

    def __init__(self, memory_bytes: int = _DEFAULT_MEMORY_BYTES) -> None:
        self._memory_bytes = memory_bytes
        self._held_bytes = 0
        self._values: OrderedDict[str, pb.Value] = OrderedDict()
        self._omitted: OrderedDict[str, int] = OrderedDict()
        """How often each recently left-out blob was left out."""

    def externalize(self, request: TaskRequest) -> None:
        """Replace large values of ``request`` by blob references, in place."""
        if request.ByteSize() <= min(BLOB_THRESHOLD_BYTES, TASK_INLINE_BUDGET_BYTES):
            # No value of a task this small can reach the threshold, nor the task the budget:
            # one size walk instead of one per value.
            return
        candidates = [value for value in _task_values(request) if _blob_kind(value) is not None]
        remaining = []
        for value in candidates:
            if value.ByteSize() > BLOB_THRESHOLD_BYTES:
                self._refer(value)
            else:
                remaining.append(value)
        excess = request.ByteSize() - TASK_INLINE_BUDGET_BYTES
        for value in sorted(remaining, key=lambda v: v.ByteSize(), reverse=True):
            if excess <= 0:
                break
            before = value.ByteSize()
            self._refer(value)
            excess -= before - value.ByteSize()

    def load(self, request: pb.LoadBlobsRequest) -> pb.LoadBlobsResponse:
        """The values of the requested blobs, in request order, up to one page.

        Raises:
            EngineError: INVALID_ARGUMENT for an entry that is not a blob reference, NOT_FOUND
                for a blob the engine does not know (for example, referred to before a restart).
        """
        response = pb.LoadBlobsResponse()
        total = 0
        for index, entry in enumerate(request.entries):
            blob_id = self._blob_id(entry.blob_value, index)
            value = self._values.get(blob_id)
            if value is None:
                raise errors.EngineError(
                    grpc.StatusCode.NOT_FOUND,
                    pb.ERROR_SUB_STATUS_UNCATEGORIZED,
                    f"LoadBlobs: blob {blob_id!r} of flow {entry.flow_id!r} is unknown; "
                    "run the task again to get current references",
                )
            size = value.ByteSize() + len(blob_id) + 16
            if total and total + size > LOAD_BLOBS_PAGE_BYTES:
                self._note_omitted(blob_id)
                continue
            if blob_id not in response.values:
                total += size
                response.values[blob_id].CopyFrom(value)
        return response

    def is_paging_failure(self, error: pb.WorkerErrorResponse) -> bool:
        """Whether a Worker failed only because a ``LoadBlobs`` page left blobs for later."""
        text = f"{error.detail}\n{error.stack_trace}"
        if "LoadBlobs omitted blob" not in text:
            return False
        return any(
            blob_id in text and count <= _MAX_OMISSIONS for blob_id, count in self._omitted.items()
        )

    # ---------------------------------------------------------------------------------------

    def _refer(self, value: pb.Value) -> None:
        kind = _blob_kind(value)
        digest = hashlib.sha256(value.SerializeToString(deterministic=True)).hexdigest()
        blob_id = f"sha256-{digest}"
        if blob_id in self._values:
            self._values.move_to_end(blob_id)
        else:
            stored = pb.Value()
            stored.CopyFrom(value)
            self._values[blob_id] = stored
            self._held_bytes += stored.ByteSize()
            self._evict()
        if kind == "string_value":
            value.internal_blob_id_for_string_value = blob_id
        else:
            value.internal_blob_id_for_obj_value = blob_id

    def _evict(self) -> None:
        while self._held_bytes > self._memory_bytes and len(self._values) > 1:
            _, dropped = self._values.popitem(last=False)
            self._held_bytes -= dropped.ByteSize()

    def _note_omitted(self, blob_id: str) -> None:
        self._omitted[blob_id] = self._omitted.get(blob_id, 0) + 1
        self._omitted.move_to_end(blob_id)
        while len(self._omitted) > _OMITTED_MEMORY:
            self._omitted.popitem(last=False)

    @staticmethod
    def _blob_id(value: pb.Value, index: int) -> str:
        kind = value.WhichOneof("kind")
        if kind == "internal_blob_id_for_string_value":
            return value.internal_blob_id_for_string_value
        if kind == "internal_blob_id_for_obj_value":
            return value.internal_blob_id_for_obj_value
        raise errors.invalid_argument(f"LoadBlobs: entry {index} is not a blob reference")
