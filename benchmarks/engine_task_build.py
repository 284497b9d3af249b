"""Benchmark: what the engine pays to build a task for a Worker, by task size.

A task carries the Flow's Attributes, with the AttributeMap instances the Step or RPC loads; before
it leaves, the engine turns its large values into blob references (``BlobStore.externalize``) and
checks it against the 4 MiB a Worker can receive. Late in a session the tasks that load the
transcript hold hundreds of AttributeMap instances. For a Flow of ``--instances`` instances of
about 260 bytes each (a stored message of a short turn), in one process, this times building an
RPC's task that loads them all (``rpc_request``: the state copied in, then externalized), the
preparation of a built Step task (externalize and the size check), and its frame to a pull Worker
built and serialized (``PollWorkerTaskResponse``, as the stream's writer sends it).

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
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from dex.dexpb import dex_pb2 as pb
from dex_local_engine import pull_dispatch
from dex_local_engine.blob_values import BlobStore
from dex_local_engine.dispatch import DispatchTask
from dex_local_engine.flow_state import FlowRun
from dex_local_engine.store import Durability, Store
from dex_local_engine.task_requests import rpc_request
from dex_local_engine.value_limits import oversized_task

_STORED_MESSAGE = '{"role":"assistant","framework_item":"' + "x" * 200 + '","sequence":12}'


def _run(instances: int) -> FlowRun:
    return FlowRun(
        flow_id="session-1",
        run_id="run-1",
        flow_type="AgentSession",
        start_request=pb.StartFlowRequest(),
        config=pb.FlowConfig(),
        started_at=0.0,
        attributes={
            f"messages/{index}": pb.Value(string_value=_STORED_MESSAGE)
            for index in range(instances)
        },
    )


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


def _frame_builder() -> Callable[[DispatchTask], pb.PollWorkerTaskResponse]:
    built: Callable[[DispatchTask], pb.PollWorkerTaskResponse] | None = getattr(
        pull_dispatch, "_poll_worker_task_response", None
    )
    if built is not None:
        return built
    # Revisions before it built a PollWorkerTask, then the response around it.
    old = pull_dispatch._poll_worker_task  # type: ignore[attr-defined]
    return lambda task: pb.PollWorkerTaskResponse(task=old(task))


def _send(build: Callable[[DispatchTask], pb.PollWorkerTaskResponse], task: DispatchTask) -> None:
    build(task).SerializeToString()


def _dispatch_task(request: pb.InvokeExecuteMethodRequest) -> DispatchTask:
    return DispatchTask("task-1", "session-1", "AgentSession", "", None, request, datetime.now(UTC))


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
        print(f"engine_task_build: best of 5 x {args.rounds} builds and preparations")
        for instances in (int(count) for count in args.instances.split(",")):
            run = _run(instances)
            call = pb.InvokeRPCRequest(
                rpc_name="get_agent_state", load_attribute_map_instances=["messages/"]
            )
            build = functools.partial(rpc_request, run, call, blobs)
            built = min(timeit.repeat(build, number=args.rounds, repeat=5)) / args.rounds
            task = _task(instances)
            prepare = functools.partial(_prepare, blobs, task)
            prepared = min(timeit.repeat(prepare, number=args.rounds, repeat=5)) / args.rounds
            send = functools.partial(_send, _frame_builder(), _dispatch_task(task))
            sent = min(timeit.repeat(send, number=args.rounds, repeat=5)) / args.rounds
            print(
                f"{instances:5} instances, task of {task.ByteSize() // 1024:4} KiB: "
                f"RPC task built {built * 1e6:7.1f} us, Step task externalized and size-checked "
                f"{prepared * 1e6:7.1f} us, its pull frame built and serialized {sent * 1e6:7.1f} us"
            )


if __name__ == "__main__":
    main()
