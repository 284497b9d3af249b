"""The pull Worker's stream upkeep with dex-python-sdk 1.23.0, in one pass over its streams.

The SDK's pull Worker (``PullWorkerRuntime``) reconciles its ``PollWorkerTask`` streams each time
something changes (a task starts or ends, a stream registers, retires or closes: about 35 times in
a Stepwise turn). Its ``_reconcile`` asks every stream whether it should retire, and each stream
answers by counting the idle registered streams of its queue over all streams; then it counts the
idle streams of each queue over all streams again. That is quadratic in the streams, and
dex-agents' Workers hold many: one idle stream per task slot for each queue, so a burst of
parallel Steps or sessions finds a stream at once (the engine registers the spares lazily). A
Worker of 16 task slots serving one Flow keeps about 32 streams, the benchmarks' Worker serving
two about 50, where a reconcile took 37 µs against 15 µs in one pass (about 3 % of that Worker's
CPU a turn; ``benchmarks/worker_stream_reconcile.py``).

:func:`install_sdk_pull_stream_patches` replaces ``PullWorkerRuntime._reconcile`` for the SDK
versions whose reconcile it reproduces (:data:`LINEAR_RECONCILE_SDK_VERSIONS`) with
:func:`reconcile_streams`: the same streams retire, in the same order, and the same streams open,
from one count per queue. Another SDK version is left alone.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from importlib import metadata
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from dex._pull_worker import PullStream, PullWorkerRuntime

__all__ = [
    "LINEAR_RECONCILE_SDK_VERSIONS",
    "install_sdk_pull_stream_patches",
    "reconcile_streams",
]

LINEAR_RECONCILE_SDK_VERSIONS: Final = frozenset({"1.23.0"})
"""``dex-python-sdk`` versions whose ``PullWorkerRuntime._reconcile`` :func:`reconcile_streams`
reproduces."""

_install_lock = threading.Lock()
_installed = False


def reconcile_streams(runtime: PullWorkerRuntime, stub: Any) -> None:
    """Retire the idle registered streams a queue has beyond its desired idle count, then open
    new streams until each queue has its desired idle count, as dex-python-sdk 1.23.0's
    ``PullWorkerRuntime._reconcile`` does, in time linear in the streams.

    A stream retires when at least ``desired_idle_streams_per_queue`` other registered streams
    of its queue are idle and not draining; streams are asked in the order the SDK asks them, and
    one that retires no longer counts for the streams asked after it. ``stub`` is the Worker's
    ``WorkerTaskService`` stub, given to each new stream.
    """
    if runtime._stopping is None or runtime._stopping.is_set():
        return
    streams = tuple(runtime._streams)
    spare = Counter(stream.queue for stream in streams if _may_retire(stream))
    for stream in streams:
        if not _may_retire(stream):
            continue
        # ``spare`` counts this stream too: the others are one fewer.
        if spare[stream.queue] - 1 >= runtime.desired_idle_streams_per_queue(stream.queue):
            stream.is_draining = True
            stream._is_retiring = True
            stream._retirement_requested.set()
            spare[stream.queue] -= 1
    idle = Counter(
        stream.queue
        for stream in runtime._streams
        if not stream.is_busy and not stream.is_half_closing
    )
    at_task_limit = runtime._busy_tasks == runtime.max_concurrent_tasks
    for queue in runtime.queues:
        target = (
            runtime.idle_streams_per_queue
            if at_task_limit
            else runtime.desired_idle_streams_per_queue(queue)
        )
        for _ in range(target - idle[queue]):
            _open_stream(runtime, stub, queue)


def install_sdk_pull_stream_patches() -> bool:
    """Replace the SDK pull Worker's stream reconcile with :func:`reconcile_streams`, once per
    process, for an SDK version in :data:`LINEAR_RECONCILE_SDK_VERSIONS`.

    ``dex_agents``' Workers (``dex-agents worker``, ``LocalRuntime``, the testing helpers) call it
    before they start.

    Returns:
        ``True`` when the reconcile is replaced (now or before), ``False`` for another SDK version.

    Example:
        >>> install_sdk_pull_stream_patches()
        True
    """
    global _installed
    with _install_lock:
        if _installed:
            return True
        if metadata.version("dex-python-sdk") not in LINEAR_RECONCILE_SDK_VERSIONS:
            return False
        # A private SDK module, reached only for the versions checked above.
        from dex._pull_worker import PullWorkerRuntime

        PullWorkerRuntime._reconcile = reconcile_streams  # type: ignore[method-assign,assignment]
        _installed = True
        return True


def _may_retire(stream: PullStream) -> bool:
    """Idle, registered and not draining: a stream the SDK may retire, or count as a spare."""
    return stream._is_registered and not stream.is_busy and not stream.is_draining


def _open_stream(runtime: PullWorkerRuntime, stub: Any, queue: str) -> None:
    # Looked up at each call, as the SDK's own reconcile does (and a test can stand in for it).
    from dex import _pull_worker

    stream = _pull_worker.PullStream(runtime, stub, queue)
    runtime._streams.add(stream)
    stream.run_task = asyncio.create_task(stream.run())
    stream.run_task.add_done_callback(stream.on_done)
