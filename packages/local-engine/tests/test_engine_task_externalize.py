"""BlobStore.externalize: a task's large values leave as references, and the size it returns is
the task's serialized size afterwards (the Step scheduler's size check reads it instead of
walking the task again)."""

from __future__ import annotations

from pathlib import Path

from dex.dexpb import dex_pb2 as pb
from dex_local_engine.blob_values import (
    BLOB_THRESHOLD_BYTES,
    TASK_INLINE_BUDGET_BYTES,
    BlobStore,
    blob_reference_id,
    blob_references,
)
from dex_local_engine.store import Durability, Store

KIB = 1024


def _blobs(tmp_path: Path) -> BlobStore:
    return BlobStore(Store.open(tmp_path / "engine.db", Durability.PROCESS_CRASH_SAFE))


def _execute_task(values: list[str]) -> pb.InvokeExecuteMethodRequest:
    return pb.InvokeExecuteMethodRequest(
        flow_type="F",
        step_type="S",
        attributes=[
            pb.KV(key=f"messages\x00{index}", value=pb.Value(string_value=text))
            for index, text in enumerate(values)
        ],
    )


def _loaded(blobs: BlobStore, reference: pb.Value) -> str:
    request = pb.LoadBlobsRequest(
        entries=[pb.LoadBlobRequestEntry(flow_id="f", blob_value=reference)]
    )
    return blobs.load(request).values[blob_reference_id(reference)].string_value


def test_a_small_task_stays_inline_and_its_size_is_returned(tmp_path: Path) -> None:
    task = _execute_task(["a" * KIB, "b" * KIB])
    before = task.SerializeToString()
    assert _blobs(tmp_path).externalize(task) == len(before)
    assert task.SerializeToString() == before


def test_an_rpc_input_over_the_threshold_leaves_as_a_reference(tmp_path: Path) -> None:
    blobs = _blobs(tmp_path)
    large = "r" * (BLOB_THRESHOLD_BYTES + KIB)
    task = pb.InvokeWorkerRPCRequest(
        flow_type="F", rpc_name="r", input=pb.Value(string_value=large)
    )
    size = blobs.externalize(task)
    assert size == task.ByteSize() < KIB
    (reference,) = blob_references(task)
    assert _loaded(blobs, reference) == large


def test_a_task_over_the_inline_budget_sends_its_largest_values_as_references(
    tmp_path: Path,
) -> None:
    blobs = _blobs(tmp_path)
    # Every value under the threshold, together over the budget: the largest leave first.
    values = [f"{index:02d}" + "v" * (200 * KIB) for index in range(16)]
    values[3] += "w" * (40 * KIB)
    task = _execute_task(values)
    assert task.ByteSize() > TASK_INLINE_BUDGET_BYTES
    size = blobs.externalize(task)
    assert size == task.ByteSize() <= TASK_INLINE_BUDGET_BYTES
    references = list(blob_references(task))
    assert 1 <= len(references) < len(values)
    assert blob_reference_id(task.attributes[3].value) != ""
    assert sorted(_loaded(blobs, reference) for reference in references)[0] in values


def test_a_method_task_within_the_budget_is_not_walked_value_by_value(tmp_path: Path) -> None:
    # Attributes and Channel messages were interned where they entered the engine; one an older
    # database holds inline over the threshold travels inline while its task fits the budget.
    task = _execute_task(["s" * KIB, "L" * (BLOB_THRESHOLD_BYTES + KIB)])
    before = task.SerializeToString()
    assert _blobs(tmp_path).externalize(task) == len(before)
    assert task.SerializeToString() == before
