"""Benchmark: what the engine pays to prepare a Step method's task for a Worker, by task size.

Before a task leaves, the engine turns its large values into blob references
(``BlobStore.externalize``) and checks the task against the 4 MiB a Worker can receive. Late in a
session the tasks that load the transcript hold hundreds of AttributeMap instances; this times
that preparation for tasks of ``--instances`` instances of about 260 bytes each (a stored message
of a short turn), in one process.

Compare revisions by running it with each revision's packages first on the path::

    PYTHONPATH=$(ls -d BEFORE_WORKTREE/packages/*/src | paste -sd:) \\
        uv run python benchmarks/engine_task_build.py
    uv run python benchmarks/engine_task_build.py
"""

from __future__ import annotations

import argparse
import functools
import inspect
import tempfile
import timeit
from pathlib import Path
from typing import Final

from dex.dexpb import dex_pb2 as pb
from dex_local_engine.blob_values import BlobStore
from dex_local_engine.store import Durability, Store
from dex_local_engine.value_limits import oversized_task

_STORED_MESSAGE = '{"role":"assistant","framework_item":"' + "x" * 200 + '","sequence":12}'


def _task(instances: int) -> pb.InvokeExecuteMethodRequest:
    return pb.InvokeExecuteMethodRequest(
        flow_type="AgentSession",
        step_type="RunModel",
        attributes=[
            pb.KV(key=f"messages\x00{index}", value=pb.Value(string_value=_STORED_MESSAGE))
            for index in range(instances)
        ],
    )


# Revisions before externalize returned the size gave oversized_task the task to measure again.
_CHECKS_SIZE: Final = "size" in inspect.signature(oversized_task).parameters


def _prepare(blobs: BlobStore, task: pb.InvokeExecuteMethodRequest) -> None:
    size = blobs.externalize(task)
    oversized_task(size if _CHECKS_SIZE else task, "RunModel")  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--instances",
        default="400,800,1200",
        help="comma-separated instance counts (default 400,800,1200)",
    )
    parser.add_argument("--rounds", type=int, default=200, help="preparations per timing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        blobs = BlobStore(Store.open(Path(directory) / "engine.db", Durability.PROCESS_CRASH_SAFE))
        print(f"engine_task_build: best of 5 x {args.rounds} preparations")
        for instances in (int(count) for count in args.instances.split(",")):
            task = _task(instances)
            prepare = functools.partial(_prepare, blobs, task)
            seconds = min(timeit.repeat(prepare, number=args.rounds, repeat=5))
            print(
                f"task of {instances:5} instances, {task.ByteSize() // 1024:4} KiB: "
                f"{seconds / args.rounds * 1e6:7.1f} us to externalize and size-check"
            )


if __name__ == "__main__":
    main()
