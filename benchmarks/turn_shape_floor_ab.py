"""Benchmark: ``turn_shape_floor.py``'s overhead on several engines, side by side in one run.

Each variant is an engine: this checkout's, another git revision's (its
``packages/local-engine/src`` exported and run in this same Python, see ``engine_checkouts.py``),
or either of them with extra environment variables (gRPC or engine settings). Every round runs
every variant once, in a shuffled order, each on a fresh database with its own Worker child and
Client, for ``--turns`` turns after ``--warmup``; so a variant is never measured only while the
shared machine happened to be busy. It prints, per variant, the median over rounds of each
round's median overhead above the model sleeps (until the turn's last event is read, and until
the query after it), the engine's and the Worker's CPU time per turn (from ``/proc``, which a busy
shared machine disturbs less than latency), and the machine's load average before and after.

Variants are ``LABEL=REVISION`` (``.`` for this checkout) with optional ``+NAME=VALUE``
environment settings (``+switchinterval=SECONDS`` sets the engine's ``sys.setswitchinterval``
instead), for example::

    uv run python benchmarks/turn_shape_floor_ab.py --rounds 5 \\
        --variant main=main --variant this=. --variant this-poll=.+GRPC_POLL_STRATEGY=poll

Default variants: ``main`` (the engine of ``main``) and ``this`` (this checkout).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from dex import AsyncClient, BlobCacheConfig, ClientOptions, Registry, WorkerTarget, open_blob_cache
from dex_agents import agent_codec_registry
from dex_agents.testing import WorkerProcess
from engine_checkouts import EngineCommand, engine_command, export_engine_source, start_engine
from turn_shape_floor import MODEL_LATENCY_ENV, WORKER_MODULE, build_flow, measure_floor_turns

_BENCHMARK_DIR: Final = Path(__file__).resolve().parent
_THIS_CHECKOUT: Final = "."
_DEFAULT_VARIANTS: Final = ("main=main", "this=.")
_BLOB_CACHE_BYTES: Final = 64 * 1024 * 1024
_SWITCH_INTERVAL: Final = "switchinterval"


@dataclass
class Variant:
    """One engine to measure and the per-round medians measured on it (seconds)."""

    label: str
    command: EngineCommand
    until_last_event: list[float] = field(default_factory=list)
    until_query: list[float] = field(default_factory=list)
    engine_cpu: list[float] = field(default_factory=list)
    worker_cpu: list[float] = field(default_factory=list)


def _parse_variant(spec: str, scratch: Path) -> Variant:
    """``LABEL=REVISION[+NAME=VALUE...]`` as a Variant (exports the revision's engine)."""
    label, separator, rest = spec.partition("=")
    if not separator or not label or not rest:
        raise SystemExit(f"--variant {spec!r}: expected LABEL=REVISION[+NAME=VALUE...]")
    revision, *settings = rest.split("+")
    env: list[tuple[str, str]] = []
    switch_interval = ""
    for setting in settings:
        name, equals, value = setting.partition("=")
        if not equals or not name:
            raise SystemExit(f"--variant {spec!r}: {setting!r} is not NAME=VALUE")
        if name == _SWITCH_INTERVAL:
            switch_interval = repr(float(value))
        else:
            env.append((name, value))
    source = None if revision == _THIS_CHECKOUT else export_engine_source(revision, scratch / label)
    base = engine_command(source, label)
    argv = base.argv
    if switch_interval:
        # The engine's GIL switch interval: how long its event loop may keep the GIL while
        # gRPC's completion-queue thread waits to hand it an event (CPython's default 5 ms).
        python, flag, code = argv
        argv = (python, flag, f"import sys; sys.setswitchinterval({switch_interval}); {code}")
    return Variant(label, EngineCommand(label, argv, (*base.env, *env)))


async def _measure_once(variant: Variant, scratch: Path, arguments: argparse.Namespace) -> None:
    flow = build_flow(arguments.model_latency_ms)
    engine = await start_engine(variant.command, scratch / "engine.db", scratch / "engine-logs")
    worker: WorkerProcess | None = None
    cache = open_blob_cache(BlobCacheConfig(str(scratch / "client-cache"), _BLOB_CACHE_BYTES))
    try:
        worker = await WorkerProcess.start(
            WORKER_MODULE,
            server_address=engine.address,
            state_dir=scratch / "worker",
            cwd=_BENCHMARK_DIR,
            env={MODEL_LATENCY_ENV: repr(arguments.model_latency_ms)},
        )
        registry = Registry([flow], agent_codec_registry(), allow_async_handlers=True)
        options = ClientOptions(
            server_address=engine.address, worker_target=WorkerTarget(pull=True)
        )
        async with AsyncClient(registry, cache, options) as client:
            cpu_before = _cpu_seconds(engine.process.pid), _cpu_seconds(worker.pid)
            timings = await measure_floor_turns(client, flow, arguments.turns, arguments.warmup)
            cpu_after = _cpu_seconds(engine.process.pid), _cpu_seconds(worker.pid)
    finally:
        if worker is not None:
            worker.kill()
        cache.close()
        await engine.stop()
    until_last_event, until_query = timings.overhead()
    variant.until_last_event.append(until_last_event)
    variant.until_query.append(until_query)
    turns = arguments.turns + arguments.warmup
    engine_cpu = (cpu_after[0] - cpu_before[0]) / turns
    worker_cpu = (cpu_after[1] - cpu_before[1]) / turns
    variant.engine_cpu.append(engine_cpu)
    variant.worker_cpu.append(worker_cpu)
    print(
        f"  {variant.label:<16} {1000 * until_last_event:7.1f} ms / {1000 * until_query:7.1f} ms"
        f"   CPU per turn: engine {1000 * engine_cpu:5.1f} ms, Worker {1000 * worker_cpu:5.1f} ms",
        flush=True,
    )


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` (all its threads) has used (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


async def _run(arguments: argparse.Namespace) -> None:
    rng = random.Random(arguments.seed)
    with tempfile.TemporaryDirectory(prefix="dex-floor-ab-") as scratch_name:
        scratch = Path(scratch_name)
        variants = [
            _parse_variant(spec, scratch / "sources")
            for spec in (arguments.variant or _DEFAULT_VARIANTS)
        ]
        load_before = _load()
        print(
            f"turn_shape_floor_ab: {arguments.rounds} rounds x {len(variants)} engines, "
            f"{arguments.turns} turns after {arguments.warmup} warm-up, "
            f"{arguments.model_latency_ms:g} ms per model call; load average {load_before}"
        )
        print("  overhead above the model sleeps per round (last event / query):")
        for number in range(arguments.rounds):
            order = list(variants)
            rng.shuffle(order)
            for variant in order:
                await _measure_once(variant, scratch / f"round-{number}-{variant.label}", arguments)
    print(f"load average before {load_before}, after {_load()}; cores: {os.cpu_count()}")
    print(
        f"  {'engine':<16} {'last event':>11} {'query':>11} {'ratio':>12}"
        f" {'engine CPU/turn':>16} {'Worker CPU/turn':>16}   (medians over rounds)"
    )
    reference = statistics.median(variants[0].until_last_event)
    for variant in variants:
        event = statistics.median(variant.until_last_event)
        query = statistics.median(variant.until_query)
        print(
            f"  {variant.label:<16} {1000 * event:8.1f} ms {1000 * query:8.1f} ms"
            f" {event / reference:>6.2f} of {variants[0].label:<4}"
            f" {1000 * statistics.median(variant.engine_cpu):13.1f} ms"
            f" {1000 * statistics.median(variant.worker_cpu):13.1f} ms"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--turns", type=int, default=20, help="measured turns (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up turns (default 3)")
    parser.add_argument("--model-latency-ms", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=0, help="of the shuffled orders")
    parser.add_argument(
        "--variant",
        action="append",
        help="LABEL=REVISION[+NAME=VALUE...]; REVISION '.' is this checkout (repeatable)",
    )
    asyncio.run(_run(parser.parse_args(argv)))


if __name__ == "__main__":
    main(sys.argv[1:])
