"""Benchmark: what a pull Worker pays to reconcile its streams, the SDK's way and dex-agents' way.

dex-python-sdk 1.23.0's ``PullWorkerRuntime._reconcile`` runs each time a Worker's streams change
(about 35 times in a Stepwise turn) and is quadratic in the Worker's streams; dex-agents' Workers
keep one idle stream per task slot for each queue, so they hold many
(``dex_agents._sdk_pull_streams``). This times the SDK's method against
``reconcile_streams`` on one real ``PullWorkerRuntime`` holding real ``PullStream`` objects in the
states a Worker serving sessions has while one task runs: ``--slots`` idle streams per queue (the
sticky queue and one per Flow type), two of them registered (the engine registers spares lazily),
and the busy one.
Nothing opens or retires in these states, so every round times the same work. One process, the
two methods alternating, medians.

Run from the repository root::

    uv run python benchmarks/worker_stream_reconcile.py
    uv run python benchmarks/worker_stream_reconcile.py --slots 8,16,32 --flow-types 1,2 --rounds 7
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from dex import PullWorkerOptions, Registry
from dex._pull_worker import PullStream, PullWorkerRuntime
from dex_agents._sdk_pull_streams import reconcile_streams
from turn_shape_floor import TurnShapeFlow

_RECONCILES_PER_TURN = 35
"""``_reconcile`` calls per Stepwise turn (``session_turns.py --cprofile-worker``: 1,152 in 33)."""

_REGISTERED_PER_QUEUE = 2
"""Registered idle streams per queue after a session turn's parallel tool Step."""


class _NamedFlow(TurnShapeFlow):
    """A Flow to register; only its Flow type matters here (one queue each)."""

    def __init__(self, flow_type: str) -> None:
        super().__init__(model_latency_seconds=0.0)
        self._flow_type = flow_type

    def get_flow_type(self) -> str:
        return self._flow_type


def _runtime(slots: int, flow_types: int) -> PullWorkerRuntime:
    registry = Registry(
        [_NamedFlow(f"Flow{number}") for number in range(flow_types)], allow_async_handlers=True
    )
    runtime = PullWorkerRuntime(
        registry,
        None,
        PullWorkerOptions(max_concurrent_tasks=slots, idle_streams_per_queue=slots),
        "127.0.0.1:1",
        None,
        app_worker_id="bench-worker",
    )
    runtime._stopping = asyncio.Event()
    for queue in runtime.queues:
        for number in range(slots):
            stream = PullStream(runtime, None, queue)
            stream._is_registered = number < _REGISTERED_PER_QUEUE
            runtime._streams.add(stream)
    # One more stream, busy with a task: its queue keeps its idle streams.
    busy = PullStream(runtime, None, runtime.queues[0])
    busy._is_registered = busy.is_busy = True
    runtime._streams.add(busy)
    runtime._busy_tasks = 1
    return runtime


def _time(reconcile: Callable[[PullWorkerRuntime, Any], None], runtime: PullWorkerRuntime) -> float:
    calls = 2_000
    started = time.perf_counter()
    for _ in range(calls):
        reconcile(runtime, None)
    return (time.perf_counter() - started) / calls * 1e6


async def _measure(slots: int, flow_types: int, rounds: int) -> tuple[int, float, float]:
    runtime = _runtime(slots, flow_types)
    streams = len(runtime._streams)
    sdk: list[float] = []
    ours: list[float] = []
    for _ in range(rounds):
        sdk.append(_time(PullWorkerRuntime._reconcile, runtime))
        ours.append(_time(reconcile_streams, runtime))
    if len(runtime._streams) != streams or any(stream.is_draining for stream in runtime._streams):
        raise SystemExit(
            "a reconcile opened or retired a stream: the rounds did not time one state"
        )
    return streams, statistics.median(sdk), statistics.median(ours)


def _numbers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", default="8,16,32", help="task slots, comma-separated")
    parser.add_argument("--flow-types", default="1,2", help="Flow types served, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args(argv)
    print(
        f"{'slots':>5} {'Flow types':>10} {'streams':>7} {'SDK':>10} {'installed':>10} "
        f"{'saved per turn':>15}"
    )
    for flow_types in _numbers(options.flow_types):
        for slots in _numbers(options.slots):
            streams, sdk, ours = asyncio.run(_measure(slots, flow_types, options.rounds))
            saved = (sdk - ours) * _RECONCILES_PER_TURN / 1000
            print(
                f"{slots:>5} {flow_types:>10} {streams:>7} {sdk:>8.1f}µs {ours:>8.1f}µs "
                f"{saved:>12.2f} ms"
            )
    print(
        f"medians of {options.rounds} rounds of 2,000 reconciles; 'saved per turn' assumes "
        f"{_RECONCILES_PER_TURN} reconciles a turn | load average {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
