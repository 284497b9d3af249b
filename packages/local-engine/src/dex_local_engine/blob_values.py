"""Large values live once, as blobs in SQLite, and travel as blob references.

Every SDK channel keeps gRPC's 4 MiB receive limit, so a task carrying its loaded values inline
could never reach a Worker once they pass 4 MiB together. Dex's answer is the blob reference: a
``Value`` whose kind is ``internal_blob_id_for_string_value`` or ``internal_blob_id_for_obj_value``.
The SDK's value hydrators resolve such references through ``FlowService.LoadBlobs`` (one call per
task, for the references its blob cache does not hold) before the handler runs.

Where a value enters the engine (a Client request, a Step or RPC result, a heartbeat, a history
event), every string or object value over :data:`BLOB_THRESHOLD_BYTES` is replaced by a reference
(:meth:`BlobStore.intern`), so the run's state, its snapshot and its history hold only the
reference. The value itself becomes a row of the database's ``blobs`` table, written in the same
transaction as the first commit that refers to it (:meth:`BlobStore.pending_rows`): a reference
that was committed always resolves, across any restart. A blob's ID is the SHA-256 of the value,
so the same value keeps its ID wherever it is stored and a Worker's blob cache serves it after
the first load. History keeps every event, so a blob is kept for the life of the database.

A task that would still exceed :data:`TASK_INLINE_BUDGET_BYTES` has its largest remaining inline
values sent as references too (:meth:`BlobStore.externalize`); those blobs are written before the
task leaves the engine.

``LoadBlobs`` answers at most :data:`LOAD_BLOBS_PAGE_BYTES` of values, in request order. When a
task refers to more than that, the SDK caches the values it received, then fails the attempt
naming the first omitted blob; the engine recognises that failure
(:meth:`BlobStore.is_paging_failure`) and dispatches the same attempt again (no retry used), so
each round loads the next page until the Worker's cache holds them all.

A single value can never exceed what one ``LoadBlobs`` response can carry to an SDK channel, so
the per-value limit stays just under 4 MiB (:data:`dex_local_engine.value_limits.MAX_VALUE_BYTES`).
Clients read Attributes, Channel messages and Flow state hydrated (:meth:`BlobStore.hydrate`);
Flow results, RPC outputs and search entries reach them as references, which the SDK hydrates.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterator, Sequence

import grpc
from dex.dexpb import dex_pb2 as pb
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from dex_local_engine import errors
from dex_local_engine.dispatch import TaskRequest
from dex_local_engine.store import Store

__all__ = [
    "BLOB_THRESHOLD_BYTES",
    "LOAD_BLOBS_PAGE_BYTES",
    "TASK_INLINE_BUDGET_BYTES",
    "BlobStore",
    "blob_reference_id",
    "blob_references",
    "is_blob_reference",
]

BLOB_THRESHOLD_BYTES = 256 * 1024
"""String and object values larger than this are stored and sent as blob references."""

TASK_INLINE_BUDGET_BYTES = 3 * 1024 * 1024
"""A task larger than this has its largest values sent as blob references until it fits."""

LOAD_BLOBS_PAGE_BYTES = 3 * 1024 * 1024 + 512 * 1024
"""Largest ``LoadBlobs`` response (a single larger value is still sent alone)."""

_DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
"""Blob values kept in memory (most recently used), so hot blobs skip the database."""
_WRITTEN_MEMORY = 65536
"""Blob IDs remembered as stored, so a task does not write a known blob again."""
_OMITTED_MEMORY = 4096
_MAX_OMISSIONS = 16
"""After a blob was left out this often, a Worker is not keeping its pages (a blob cache smaller
than the task's values): its failure is an ordinary attempt failure, so retries end."""

_REFERENCE_KINDS = ("internal_blob_id_for_string_value", "internal_blob_id_for_obj_value")


def is_blob_reference(value: pb.Value) -> bool:
    """Whether ``value`` is a blob reference rather than a value."""
    return value.WhichOneof("kind") in _REFERENCE_KINDS


def _blob_kind(value: pb.Value) -> str | None:
    kind = value.WhichOneof("kind")
    return kind if kind in ("string_value", "obj_value") else None


def _child_messages(message: Message) -> Iterator[Message]:
    """The set message fields of ``message`` (repeated and map entries one by one)."""
    for field, content in message.ListFields():
        entry = field.message_type
        if field.type != FieldDescriptor.TYPE_MESSAGE or entry is None:
            continue
        if entry.GetOptions().map_entry:
            if entry.fields_by_name["value"].type == FieldDescriptor.TYPE_MESSAGE:
                yield from content.values()
        elif field.is_repeated:
            yield from content
        else:
            yield content


def _large_values(message: Message, threshold: int) -> Iterator[pb.Value]:
    """The string and object Values in ``message`` over ``threshold`` bytes (only big branches
    are entered, so a small message costs one size computation)."""
    if isinstance(message, pb.Value):
        if _blob_kind(message) is not None:
            yield message
        return
    for child in _child_messages(message):
        if child.ByteSize() > threshold:
            yield from _large_values(child, threshold)


def blob_references(message: Message) -> Iterator[pb.Value]:
    """Every blob reference anywhere in ``message``.

    Example::

        ids = [blob_reference_id(value) for value in blob_references(event)]
    """
    if isinstance(message, pb.Value):
        if is_blob_reference(message):
            yield message
        return
    for child in _child_messages(message):
        yield from blob_references(child)


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


class BlobStore:
    """The engine's blobs: references in, values out, rows in the database.

    Example::

        blobs = BlobStore(store)
        blobs.intern(response)                # large values of a Step result become references
        store.commit(flows, history, blobs=blobs.pending_rows())
        blobs.mark_written(rows)
        response = blobs.load(load_request)   # what a Worker's LoadBlobs gets
    """

    def __init__(self, store: Store, cache_bytes: int = _DEFAULT_CACHE_BYTES) -> None:
        self._store = store
        self._cache_bytes = cache_bytes
        self._cached_bytes = 0
        self._cache: OrderedDict[str, pb.Value] = OrderedDict()
        self._pending: dict[str, bytes] = {}
        """Blob rows for the next commit, by ID."""
        self._written: OrderedDict[str, None] = OrderedDict()
        self._omitted: OrderedDict[str, int] = OrderedDict()
        """How often each recently left-out blob was left out."""

    # ------------------------------------------------------------------ references in

    def intern(self, message: Message) -> None:
        """Replace the large values in ``message`` by references, in place.

        The blob rows wait for the next commit (:meth:`pending_rows`), which must be the commit
        that stores what refers to them.
        """
        if message.ByteSize() <= BLOB_THRESHOLD_BYTES:
            return
        for value in list(_large_values(message, BLOB_THRESHOLD_BYTES)):
            self._refer(value, store_now=False)

    def pending_rows(self) -> list[tuple[str, bytes]]:
        """The blob rows interned since the last commit (write them with it)."""
        return list(self._pending.items())

    def mark_written(self, rows: Sequence[tuple[str, bytes]]) -> None:
        """The commit holding ``rows`` succeeded."""
        for blob_id, _ in rows:
            self._pending.pop(blob_id, None)
            self._remember_written(blob_id)

    def externalize(self, request: TaskRequest) -> int:
        """Replace large inline values of a task by references, in place, storing their blobs;
        returns the task's serialized size afterwards (each size is a walk of the whole task).

        Every value but an RPC's input was interned where it entered the engine, so an RPC's input
        is the one value looked at on its own; a task still over the inline budget sends its
        largest values as references until it fits. (A value an older database holds inline over
        the threshold travels inline while its task fits the budget: walking every value of a
        large task for it cost more than the whole task's size.)
        """
        size = request.ByteSize()
        if size <= min(BLOB_THRESHOLD_BYTES, TASK_INLINE_BUDGET_BYTES):
            # No value of a task this small can reach the threshold, nor the task the budget.
            return size
        new_rows: list[tuple[str, bytes]] = []
        if isinstance(request, pb.InvokeWorkerRPCRequest):
            value = request.input
            if _blob_kind(value) is not None and value.ByteSize() > BLOB_THRESHOLD_BYTES:
                new_rows.extend(self._refer(value, store_now=True))
                size = request.ByteSize()
        if size > TASK_INLINE_BUDGET_BYTES:
            excess = size - TASK_INLINE_BUDGET_BYTES
            values = [value for value in _task_values(request) if _blob_kind(value) is not None]
            for value in sorted(values, key=lambda v: v.ByteSize(), reverse=True):
                if excess <= 0:
                    break
                before = value.ByteSize()
                new_rows.extend(self._refer(value, store_now=True))
                excess -= before - value.ByteSize()
            size = request.ByteSize()
        if new_rows:
            # Before the task leaves: its references must resolve even after a restart.
            self._store.put_blobs(new_rows)
            self.mark_written(new_rows)
        return size

    # ------------------------------------------------------------------ values out

    def load(self, request: pb.LoadBlobsRequest) -> pb.LoadBlobsResponse:
        """The values of the requested blobs, in request order, up to one page.

        Raises:
            EngineError: INVALID_ARGUMENT for an entry that is not a blob reference, NOT_FOUND
                for a blob the engine does not know.
        """
        blob_ids = [self._blob_id(entry.blob_value, i) for i, entry in enumerate(request.entries)]
        values = self._values(blob_ids)
        response = pb.LoadBlobsResponse()
        total = 0
        for entry, blob_id in zip(request.entries, blob_ids, strict=True):
            value = values.get(blob_id)
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

    def hydrate(self, message: Message) -> None:
        """Replace every blob reference in ``message`` by its value, in place (Client reads).

        Raises:
            EngineError: INTERNAL when a stored reference names no stored blob.
        """
        references = list(blob_references(message))
        if not references:
            return
        values = self._values([blob_reference_id(value) for value in references])
        for reference in references:
            blob_id = blob_reference_id(reference)
            value = values.get(blob_id)
            if value is None:
                raise errors.internal_error(f"the stored blob {blob_id!r} is missing")
            reference.CopyFrom(value)

    def resolve(self, value: pb.Value) -> pb.Value:
        """``value`` itself, or the value a blob reference names (engine-side reads)."""
        if not is_blob_reference(value):
            return value
        resolved = pb.Value()
        resolved.CopyFrom(value)
        self.hydrate(resolved)
        return resolved

    def holds(self, blob_id: str) -> bool:
        """Whether ``blob_id`` names a blob the engine holds (stored, or due with the next
        commit), so a reference to it resolves after that commit, across restarts."""
        if blob_id in self._cache or blob_id in self._pending or blob_id in self._written:
            return True
        return bool(self._store.load_blobs([blob_id]))

    def is_paging_failure(self, error: pb.WorkerErrorResponse) -> bool:
        """Whether a Worker failed only because a ``LoadBlobs`` page left blobs for later."""
        text = f"{error.detail}\n{error.stack_trace}"
        if "LoadBlobs omitted blob" not in text:
            return False
        return any(
            blob_id in text and count <= _MAX_OMISSIONS for blob_id, count in self._omitted.items()
        )

    # ---------------------------------------------------------------------------------------

    def _refer(self, value: pb.Value, *, store_now: bool) -> list[tuple[str, bytes]]:
        """Turn ``value`` into a reference; returns its blob row when it must be written now."""
        kind = _blob_kind(value)
        serialized = value.SerializeToString(deterministic=True)
        blob_id = f"sha256-{hashlib.sha256(serialized).hexdigest()}"
        self._cache_value(blob_id, value)
        rows: list[tuple[str, bytes]] = []
        if blob_id not in self._written and blob_id not in self._pending:
            if store_now:
                rows.append((blob_id, serialized))
            else:
                self._pending[blob_id] = serialized
        if kind == "string_value":
            value.internal_blob_id_for_string_value = blob_id
        else:
            value.internal_blob_id_for_obj_value = blob_id
        return rows

    def _values(self, blob_ids: Sequence[str]) -> dict[str, pb.Value]:
        found: dict[str, pb.Value] = {}
        missing: list[str] = []
        for blob_id in dict.fromkeys(blob_ids):
            cached = self._cache.get(blob_id)
            pending = self._pending.get(blob_id)
            if cached is not None:
                self._cache.move_to_end(blob_id)
                found[blob_id] = cached
            elif pending is not None:
                # Interned by the transition that is about to commit it.
                found[blob_id] = pb.Value.FromString(pending)
            else:
                missing.append(blob_id)
        if missing:
            for blob_id, payload in self._store.load_blobs(missing).items():
                value = pb.Value()
                value.ParseFromString(payload)
                found[blob_id] = value
                self._cache_value(blob_id, value)
                self._remember_written(blob_id)
        return found

    def _cache_value(self, blob_id: str, value: pb.Value) -> None:
        if blob_id in self._cache:
            self._cache.move_to_end(blob_id)
            return
        stored = pb.Value()
        stored.CopyFrom(value)
        self._cache[blob_id] = stored
        self._cached_bytes += stored.ByteSize()
        while self._cached_bytes > self._cache_bytes and len(self._cache) > 1:
            _, dropped = self._cache.popitem(last=False)
            self._cached_bytes -= dropped.ByteSize()

    def _remember_written(self, blob_id: str) -> None:
        self._written[blob_id] = None
        self._written.move_to_end(blob_id)
        while len(self._written) > _WRITTEN_MEMORY:
            self._written.popitem(last=False)

    def _note_omitted(self, blob_id: str) -> None:
        self._omitted[blob_id] = self._omitted.get(blob_id, 0) + 1
        self._omitted.move_to_end(blob_id)
        while len(self._omitted) > _OMITTED_MEMORY:
            self._omitted.popitem(last=False)

    @staticmethod
    def _blob_id(value: pb.Value, index: int) -> str:
        if not is_blob_reference(value):
            raise errors.invalid_argument(f"LoadBlobs: entry {index} is not a blob reference")
        return blob_reference_id(value)


def blob_reference_id(value: pb.Value) -> str:
    """The blob ID a reference names ("" for a Value that is no reference)."""
    kind = value.WhichOneof("kind")
    return str(getattr(value, kind)) if kind in _REFERENCE_KINDS else ""
