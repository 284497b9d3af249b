"""Benchmark: how many Steps per second the local Dex engine runs, and each Step's round trip.

For each durability mode (``process-crash-safe``, ``fsync``) it starts ``dex-local-engine serve``
as its own process on a fresh database, runs one SDK pull ``AsyncWorker`` and one ``AsyncClient``
in this process, and measures:

* sequential: one Flow of 200 Steps, each moving to the next (``go_to``);
* aggregate: 10 such Flows at once;
* long-lived (process-crash-safe only): one Flow of 5,000 Steps whose Attributes hold ~1 MB (100
  AttributeMap instances of 10 KB), each Step updating one small Attribute; the cost per Step is
  printed per 1,000 Steps and must stay flat (a commit writes what changed, not the whole run).

A Step's round trip is the time between the starts of two consecutive Steps of one Flow: the
engine records the result, schedules the next Step, dispatches it and the Worker starts it.

Usage (from the repository root)::

    uv run python benchmarks/engine_steps.py [--steps 200] [--flows 10] [--long-steps 5000]
        [--profile DIR]

``--idle-streams N`` sets the SDK Worker's ``idle_streams_per_queue`` (default: the SDK's 1). With
one idle stream per queue the SDK retires a stream whenever it finishes a task while another is
idle, so concurrent Flows make it open a new stream for most Steps; N = the number of Flows keeps
the streams open. ``--profile DIR`` runs the engine under cProfile and writes ``DIR/engine-<mode>.prof``.
Target on 2 cores, process-crash-safe: p50 <= 2 ms (>= 500 sequential Steps/s) and >= 1,000
aggregate Steps/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import dex
from dex import (
    AsyncClient,
    AsyncContext,
    AsyncWorker,
    Attribute,
    AttributeMap,
    BlobCacheConfig,
    ClientOptions,
    Flow,
    PersistenceSchema,
    PullWorkerOptions,
    Registry,
    Step,
    StepDecision,
    StepList,
    WorkerOptions,
    open_blob_cache,
)
from dex.worker_options import WorkerTarget

DURABILITY_MODES = ("process-crash-safe", "fsync")

_step_starts: dict[str, list[float]] = defaultdict(list)


class Hop(Step[int]):
    """Records when it starts, then moves to the next Hop until the count runs out."""

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        _step_starts[context.flow_id].append(time.perf_counter())
        if input <= 1:
            return dex.graceful_complete(input)
        return dex.go_to(Hop, input - 1)


class HopFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Hop())


_LARGE_INSTANCES = 100
_LARGE_INSTANCE_BYTES = 10_000


class Fill(Step[int]):
    """Fills the Flow's Attributes with ~1 MB, then starts the long chain of Ticks."""

    def __init__(self, flow: LongFlow) -> None:
        self.flow = flow

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        for number in range(_LARGE_INSTANCES):
            self.flow.notes.set(context, f"note-{number}", "x" * _LARGE_INSTANCE_BYTES)
        return dex.go_to(Tick, input)


class Tick(Step[int]):
    """Updates one small Attribute and moves on, like a session turn next to its large history."""

    def __init__(self, flow: LongFlow) -> None:
        self.flow = flow

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        _step_starts[context.flow_id].append(time.perf_counter())
        self.flow.counter.set(context, input)
        if input <= 1:
            return dex.graceful_complete(input)
        return dex.go_to(Tick, input - 1)


class LongFlow(Flow[int]):
    def __init__(self) -> None:
        self.notes = AttributeMap("notes", str)
        self.counter = Attribute("counter", int)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Fill(self)).other_steps(Tick(self))

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.notes, self.counter)


@dataclass(frozen=True)
class Figures:
    """One measurement: Steps run, wall time, Step round trips and CPU time per process."""

    steps: int
    seconds: float
    round_trips_ms: list[float]
    engine_cpu_seconds: float
    worker_cpu_seconds: float
    """CPU of this process: the SDK Worker and Client."""

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.round_trips_ms)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]

    def describe(self) -> str:
        return (
            f"{self.steps} Steps in {self.seconds:.2f} s = {self.steps_per_second:,.0f} Steps/s; "
            f"Step round trip p50 {self.percentile(0.50):.2f} ms, "
            f"p99 {self.percentile(0.99):.2f} ms, mean {statistics.fmean(self.round_trips_ms):.2f} ms; "
            f"CPU per Step: engine {1000 * self.engine_cpu_seconds / self.steps:.2f} ms, "
            f"SDK Worker+Client {1000 * self.worker_cpu_seconds / self.steps:.2f} ms"
        )


def _process_cpu_seconds(pid: int) -> float:
    """User+system CPU seconds of a live process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _process_rss_mib(pid: int) -> float:
    """Resident memory of a live process in MiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Engine:
    def __init__(self, database: Path, durability: str, profile: Path | None) -> None:
        command = [sys.executable]
        if profile is not None:
            command += ["-m", "cProfile", "-o", str(profile)]
        command += ["-m", "dex_local_engine.cli", "serve", "--address", "127.0.0.1:0"]
        command += ["--database", str(database), "--durability", durability]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        prefix = "dex-local-engine ready on "
        if not line.startswith(prefix):
            self.process.kill()
            raise RuntimeError(f"engine did not start: {line!r}")
        self.address = line.removeprefix(prefix)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


async def _run_flows(
    client: AsyncClient, flow: HopFlow, engine_pid: int, prefix: str, count: int, steps: int
) -> Figures:
    flow_ids = [f"{prefix}-{number}" for number in range(count)]
    engine_cpu = _process_cpu_seconds(engine_pid)
    own_cpu = _own_cpu_seconds()
    began = time.perf_counter()
    for flow_id in flow_ids:
        await client.start_flow(flow, flow_id, steps)
    await asyncio.gather(
        *(client.wait_for_flow(flow_id, timedelta(seconds=600)) for flow_id in flow_ids)
    )
    seconds = time.perf_counter() - began
    engine_cpu = _process_cpu_seconds(engine_pid) - engine_cpu
    own_cpu = _own_cpu_seconds() - own_cpu
    round_trips = [
        (later - earlier) * 1000
        for flow_id in flow_ids
        for earlier, later in zip(_step_starts[flow_id], _step_starts[flow_id][1:], strict=False)
    ]
    done = sum(len(_step_starts[flow_id]) for flow_id in flow_ids)
    if done != count * steps:
        raise RuntimeError(f"expected {count * steps} Steps, ran {done}")
    return Figures(done, seconds, round_trips, engine_cpu, own_cpu)


async def _measure_long(
    client: AsyncClient, flow: LongFlow, engine_pid: int, steps: int, block: int = 1000
) -> list[str]:
    """Run one long-lived Flow; describe each block of ``block`` Steps (round trip, engine CPU)."""
    flow_id = "long-lived"
    samples: list[tuple[float, float, float]] = []

    async def sample_engine_cpu() -> None:
        while True:
            moment = time.perf_counter()
            cpu = _process_cpu_seconds(engine_pid)
            samples.append((moment, cpu, _process_rss_mib(engine_pid)))
            await asyncio.sleep(0.02)

    sampler = asyncio.create_task(sample_engine_cpu())
    try:
        await client.start_flow(flow, flow_id, steps)
        await client.wait_for_flow(flow_id, timedelta(seconds=900))
    finally:
        sampler.cancel()
    starts = _step_starts[flow_id]

    def sample_at(moment: float) -> tuple[float, float, float]:
        return min(samples, key=lambda sample: abs(sample[0] - moment))

    lines = []
    for first in range(0, len(starts) - 1, block):
        last = min(len(starts) - 1, first + block)
        count = last - first
        trip_ms = 1000 * (starts[last] - starts[first]) / count
        _, cpu_first, _ = sample_at(starts[first])
        _, cpu_last, rss_mib = sample_at(starts[last])
        cpu_ms = 1000 * (cpu_last - cpu_first) / count
        lines.append(
            f"Steps {first + 1:>5}-{last + 1:>5}: mean round trip {trip_ms:.2f} ms, "
            f"engine CPU ~{cpu_ms:.2f} ms per Step, engine RSS {rss_mib:.0f} MiB"
        )
    return lines


async def _measure(
    durability: str,
    steps: int,
    flows: int,
    long_steps: int,
    idle_streams: int,
    profile_dir: Path | None,
) -> tuple[Figures, Figures, list[str]]:
    with tempfile.TemporaryDirectory(prefix="dex-engine-bench-") as scratch:
        root = Path(scratch)
        profile = profile_dir / f"engine-{durability}.prof" if profile_dir else None
        engine = _Engine(root / "engine.db", durability, profile)
        flow = HopFlow()
        long_flow = LongFlow()
        registry = Registry([flow, long_flow], allow_async_handlers=True)
        worker = AsyncWorker(
            registry,
            open_blob_cache(BlobCacheConfig(str(root / "worker-blobs"), 1 << 26)),
            WorkerOptions(
                server_address=engine.address,
                pull=PullWorkerOptions(
                    max_concurrent_tasks=max(16, 2 * flows), idle_streams_per_queue=idle_streams
                ),
            ),
        )
        running = asyncio.create_task(worker.start())
        try:
            await worker.wait_pull_registered(timeout=60)
            options = ClientOptions(
                server_address=engine.address, worker_target=WorkerTarget(pull=True)
            )
            cache = open_blob_cache(BlobCacheConfig(str(root / "client-blobs"), 1 << 26))
            async with AsyncClient(registry, cache, options) as client:
                pid = engine.process.pid
                await _run_flows(client, flow, pid, f"{durability}-warmup", 2, 20)
                sequential = await _run_flows(client, flow, pid, f"{durability}-seq", 1, steps)
                aggregate = await _run_flows(client, flow, pid, f"{durability}-agg", flows, steps)
                long_lived = (
                    await _measure_long(client, long_flow, pid, long_steps)
                    if long_steps > 0 and durability == "process-crash-safe"
                    else []
                )
        finally:
            await worker.stop()
            await running
            engine.stop()
        return sequential, aggregate, long_lived


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="Steps per Flow (default 200)")
    parser.add_argument("--flows", type=int, default=10, help="concurrent Flows (default 10)")
    parser.add_argument(
        "--long-steps", type=int, default=5000, help="Steps of the long-lived Flow (0: skip)"
    )
    parser.add_argument(
        "--idle-streams", type=int, default=0, help="SDK idle_streams_per_queue (0: SDK default)"
    )
    parser.add_argument("--durability", choices=DURABILITY_MODES, action="append")
    parser.add_argument("--profile", type=Path, help="write engine cProfile output here")
    arguments = parser.parse_args(argv)
    if arguments.profile is not None:
        arguments.profile.mkdir(parents=True, exist_ok=True)
    print(
        f"engine_steps: {arguments.steps} sequential Steps per Flow, {arguments.flows} Flows at once"
        f", SDK idle_streams_per_queue={arguments.idle_streams or 'default'}"
    )
    for durability in arguments.durability or DURABILITY_MODES:
        sequential, aggregate, long_lived = asyncio.run(
            _measure(
                durability,
                arguments.steps,
                arguments.flows,
                arguments.long_steps,
                arguments.idle_streams,
                arguments.profile,
            )
        )
        print(f"[{durability}]")
        print(f"  sequential (1 Flow):  {sequential.describe()}")
        print(f"  aggregate ({arguments.flows} Flows): {aggregate.describe()}")
        if long_lived:
            print(f"  long-lived (1 Flow, {arguments.long_steps} Steps, ~1 MB of Attributes):")
            for line in long_lived:
                print(f"    {line}")


if __name__ == "__main__":
    main()
