"""Benchmark: many concurrent sessions on one local engine, over several Worker processes.

Two modes.

**Load** (the default): ``--sessions`` sessions run ``--turns`` turns each, all at once. A turn
has the peers benchmark's shape (``load_agent.py``): the model (it sleeps ``--model-latency-ms``
per call) asks for ``lookup_order`` (a READ tool), then for ``add_order_note`` (a non-idempotent
WRITE, which waits for an approval), then answers. The client follows each turn with
``run_turn`` until it waits for the person, approves after ``--approval-delay-ms``, and follows
it to the end with ``wait_for_turn``. ``--workers`` ``dex-agents worker`` processes serve the
Flow, each with ``--task-slots`` slots, against one ``dex-local-engine serve`` (process-crash-safe,
its default). It prints, for each configuration:

- turns/s over the run, and turn latency p50/p99 *without* the person's delay (from the message
  to the approval request, plus from the approval to the turn's end);
- approval -> write running p50/p99 (the client's approval to the moment the write tool starts
  in a Worker, both wall clocks of this machine);
- CPU seconds of the engine and of the Workers (together) per turn and as a share of one core;
- the engine's RSS (peak of the samples and at the end) and the database's size (with its WAL);
- the engine's queue, from outside: ``attempts on Workers`` is ``SELECT count(*) FROM inflight``
  on the engine's database (read-only; the Step attempts a Worker holds), ``mid-turn`` is the
  sessions whose turn runs and does not wait for a person (the client knows), and ``waiting``
  is their difference: sessions whose next Step waits for a free task slot or is being scheduled.
  Their peak and mean over the one-second samples are printed;
- with ``--count-messages``, the tasks the engine offered to Workers and the offers they declined
  (a Worker at its bound declines), per turn (``engine_message_counts.py``'s hook; it costs
  engine CPU, so compare CPU only between runs that both count).

**Parked** (``--parked N``): N sessions each start a turn and stop at its approval (at most
``--start-concurrency`` being started at once), then: the engine's RSS and CPU over
``--idle-seconds`` while they all wait; ``search_flows('ActiveStepTypes = "AwaitToolApproval"')``
paged through (page size 1,000) to count them, and its first page of 50, each timed; then
``--approve-at-once`` of them approved at once: how long the approvals took to be accepted, how
long until all those turns ended, and approval -> write running p50/p99.

A progress line goes to stderr every second. The figures depend on the machine and its load (the
load average is printed); on a shared machine compare only runs made side by side.

Run from the repository root (each configuration on a fresh engine; comma lists run every
combination in turn)::

    uv run python benchmarks/load.py --sessions 100 --workers 1
    uv run python benchmarks/load.py --sessions 100,300,1000 --workers 1,2,4
    uv run python benchmarks/load.py --sessions 300 --workers 2 --task-slots 2,8,32
    uv run python benchmarks/load.py --parked 10000 --workers 2 --approve-at-once 1000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import platform
import shlex
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from dex import AsyncClient, BlobCacheConfig, ClientOptions, Registry, WorkerTarget, open_blob_cache
from dex_agents import AgentSessionClient, TurnResult, TurnStatus, agent_codec_registry
from dex_agents.testing import EngineDurability, EngineLogs, EngineProcess
from engine_message_counts import (
    COUNTS_FILE_ENV,
    engine_hook_environment,
    install_hook,
    read_counts,
)
from load_agent import FINAL_TEXT, MARKS_FILE_ENV, MODEL_LATENCY_ENV, build_flow

_BENCHMARK_DIR: Final = Path(__file__).resolve().parent
_WAITING_QUERY: Final = 'ActiveStepTypes = "AwaitToolApproval"'
_TURN_TIMEOUT_SECONDS: Final = 600.0
_WORKER_READY_SECONDS: Final = 120.0
_SAMPLE_SECONDS: Final = 1.0
_BLOB_CACHE_BYTES: Final = 64 * 1024 * 1024
_SEARCH_PAGE: Final = 1000
_CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class LoadOptions:
    """One configuration of the load mode (or of the parked mode when ``parked`` > 0)."""

    sessions: int
    workers: int
    task_slots: int
    turns: int
    model_latency_ms: float
    approval_delay_ms: float
    parked: int = 0
    approve_at_once: int = 1000
    start_concurrency: int = 200
    idle_seconds: float = 10.0
    count_messages: bool = False

    def describe(self) -> str:
        if self.parked:
            return (
                f"{self.parked} parked sessions, {self.workers} Worker(s) x {self.task_slots} "
                f"task slots, approve {min(self.approve_at_once, self.parked)} at once"
            )
        return (
            f"{self.sessions} sessions x {self.turns} turns, {self.workers} Worker(s) x "
            f"{self.task_slots} task slots, model {self.model_latency_ms:g} ms, approval after "
            f"{self.approval_delay_ms:g} ms"
        )


# --- processes ---------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far, from /proc (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _database_bytes(database: Path) -> int:
    """The database file with its WAL and shared-memory index."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            total += Path(f"{database}{suffix}").stat().st_size
    return total


def _inflight_attempts(database: Path) -> int | None:
    """``execute`` attempts Workers hold, from the engine's ``inflight`` table (read-only).

    Its ``wait_for`` rows (a Worker evaluating a wait's condition) are left out: they are short,
    and a turn waiting on a person holds no task slot.
    """
    try:
        with contextlib.closing(
            sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=0.5)
        ) as connection:
            query = "SELECT count(*) FROM inflight WHERE method = 'execute'"
            return int(connection.execute(query).fetchone()[0])
    except sqlite3.Error:
        return None


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    stdout: Path

    @property
    def pid(self) -> int:
        return self.process.pid


def _worker_command() -> list[str]:
    script = Path(sys.executable).with_name("dex-agents")
    return [str(script)] if script.exists() else [sys.executable, "-m", "dex_agents.cli"]


async def _start_worker(
    number: int, address: str, options: LoadOptions, state_dir: Path
) -> _Worker:
    """``dex-agents worker load_agent:build_flow`` in its own process group, once ready."""
    directory = state_dir / f"worker-{number}"
    directory.mkdir(parents=True)
    stdout = directory / "stdout.log"
    env = {
        **os.environ,
        MODEL_LATENCY_ENV: str(options.model_latency_ms),
        MARKS_FILE_ENV: str(state_dir / "marks.tsv"),
    }
    command = [
        *_worker_command(),
        "worker",
        "load_agent:build_flow",
        "--address",
        address,
        "--task-slots",
        str(options.task_slots),
        "--log-level",
        "WARNING",
        "--blob-cache",
        str(directory / "blob-cache"),
    ]
    with open(stdout, "wb") as out, open(directory / "stderr.log", "wb") as err:
        process = subprocess.Popen(
            command, stdout=out, stderr=err, cwd=_BENCHMARK_DIR, env=env, start_new_session=True
        )
    worker = _Worker(process, stdout)
    deadline = time.monotonic() + _WORKER_READY_SECONDS
    while b"dex-agents worker ready" not in stdout.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            _stop_worker(worker)
            err_text = (directory / "stderr.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"Worker {number} did not start: {err_text}")
        await asyncio.sleep(0.05)
    return worker


def _stop_worker(worker: _Worker) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
    worker.process.wait()


@dataclass
class _Stack:
    engine: EngineProcess
    database: Path
    workers: list[_Worker]
    client: AsyncClient
    sessions: AgentSessionClient
    marks: Path


@contextlib.contextmanager
def _engine_counting(state_dir: Path | None) -> Iterator[None]:
    """With a directory: the engine started inside counts its messages (``--count-messages``)."""
    if state_dir is None:
        yield
        return
    hook = install_hook(state_dir / "engine-count-hook")
    with engine_hook_environment(hook, COUNTS_FILE_ENV, state_dir / "engine-counts.json"):
        yield


def _counts_now(stack: _Stack, options: LoadOptions) -> Counter[str]:
    if not options.count_messages:
        return Counter()
    path = stack.database.parent.parent / "engine-counts.json"
    return read_counts(stack.engine.process.pid, path)[0]


def _offers_figure(counts: Counter[str], turns: int) -> str:
    """Tasks the engine wrote to Workers and the declines it read back, per turn."""
    if not counts or not turns:
        return ""
    offers = sum(n for kind, n in counts.items() if kind.startswith("frame out task "))
    declines = sum(n for kind, n in counts.items() if kind.startswith("frame in reject"))
    return f"{offers / turns:.1f} tasks offered, {declines / turns:.1f} declined per turn"


@contextlib.asynccontextmanager
async def _stack(options: LoadOptions, state_dir: Path) -> AsyncIterator[_Stack]:
    database = state_dir / "engine" / "engine.db"
    with _engine_counting(state_dir if options.count_messages else None):
        engine = await EngineProcess.start_local(
            database,
            EngineLogs.in_directory(state_dir / "engine"),
            durability=EngineDurability.PROCESS_CRASH_SAFE,
        )
    workers: list[_Worker] = []
    cache = open_blob_cache(BlobCacheConfig(str(state_dir / "client-cache"), _BLOB_CACHE_BYTES))
    try:
        for number in range(1, options.workers + 1):
            workers.append(await _start_worker(number, engine.server_address, options, state_dir))
        flow = build_flow()
        registry = Registry([flow], agent_codec_registry(), allow_async_handlers=True)
        client_options = ClientOptions(
            server_address=engine.server_address, worker_target=WorkerTarget(pull=True)
        )
        async with AsyncClient(registry, cache, client_options) as client:
            yield _Stack(
                engine,
                database,
                workers,
                client,
                AgentSessionClient(client, flow),
                state_dir / "marks.tsv",
            )
    finally:
        for worker in workers:
            _stop_worker(worker)
        await engine.stop()
        cache.close()


# --- measuring ---------------------------------------------------------------------------------


@dataclass
class _Progress:
    """What the sessions are doing now, and what the samples saw."""

    label: str
    total_turns: int
    done_name: str = "turns"
    """What ``done_turns`` counts: ``turns`` ended, or sessions ``parked`` on their approval."""
    done_turns: int = 0
    failed_turns: int = 0
    mid_turn: int = 0
    parked: int = 0
    queue_samples: list[tuple[int, int]] = field(default_factory=list)
    """(mid-turn sessions, attempts on Workers) per sample."""
    rss_peak: int = 0


class _CpuWindow:
    """CPU seconds the engine and the Workers used between ``start()`` and ``stop()``."""

    def __init__(self, engine_pid: int, worker_pids: Sequence[int]) -> None:
        self._pids = {"engine": [engine_pid], "Workers": list(worker_pids)}
        self._started: dict[str, float] = {}
        self._wall = 0.0
        self.used: dict[str, float] = {}
        self.wall_seconds = 0.0

    def _now(self) -> dict[str, float]:
        return {name: sum(_cpu_seconds(pid) for pid in pids) for name, pids in self._pids.items()}

    def start(self) -> None:
        self._started, self._wall = self._now(), time.monotonic()

    def stop(self) -> None:
        now = self._now()
        self.used = {name: now[name] - self._started[name] for name in now}
        self.wall_seconds = time.monotonic() - self._wall


async def _sample(stack: _Stack, progress: _Progress, started: float) -> None:
    """Every second: the queue figures, the engine's RSS, and a progress line on stderr."""
    while True:
        await asyncio.sleep(_SAMPLE_SECONDS if progress.queue_samples else 0.1)
        inflight = await asyncio.to_thread(_inflight_attempts, stack.database)
        rss = _rss_bytes(stack.engine.process.pid)
        progress.rss_peak = max(progress.rss_peak, rss)
        if inflight is not None:
            progress.queue_samples.append((progress.mid_turn, inflight))
        print(
            f"... {progress.label} {time.monotonic() - started:6.1f} s: {progress.done_name} "
            f"{progress.done_turns}/{progress.total_turns} ({progress.failed_turns} failed), "
            f"{progress.mid_turn} mid-turn, {progress.parked} waiting on a person, "
            f"{inflight if inflight is not None else '?'} attempts on Workers, engine RSS "
            f"{rss / 2**20:.0f} MiB",
            file=sys.stderr,
            flush=True,
        )


@contextlib.contextmanager
def _sampling(stack: _Stack, progress: _Progress) -> Iterator[None]:
    task = asyncio.ensure_future(_sample(stack, progress, time.monotonic()))
    try:
        yield
    finally:
        task.cancel()


def _read_marks(path: Path) -> dict[str, float]:
    """The wall time each write started, by its note (the turn's user text)."""
    marks: dict[str, float] = {}
    with contextlib.suppress(FileNotFoundError):
        for line in path.read_text(encoding="utf-8").splitlines():
            note, _, wall = line.rpartition("\t")
            marks.setdefault(note, float(wall))
    return marks


def _percentiles(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)

    def at(fraction: float) -> float:
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]

    return f"{at(0.50) * 1000:.0f} / {at(0.99) * 1000:.0f} ms"


@dataclass
class _TurnTimes:
    latencies: list[float] = field(default_factory=list)
    approvals: dict[str, float] = field(default_factory=dict)
    """Wall time of each approval, by the turn's user text."""
    errors: list[str] = field(default_factory=list)


async def _approve(
    sessions: AgentSessionClient, waiting: TurnResult, text: str, times: _TurnTimes
) -> TurnResult:
    """Approve the turn's one pending write; follow the turn to its end."""
    if waiting.status is not TurnStatus.WAITING_FOR_PERSON or not waiting.pending_interrupts:
        raise RuntimeError(f"{waiting.session_id} {text}: expected an approval, got {waiting}")
    times.approvals[text] = time.time()
    accepted = await sessions.resolve_interrupt(
        waiting.session_id, waiting.pending_interrupts[0].interrupt_id, approved=True
    )
    if not accepted:
        raise RuntimeError(f"{waiting.session_id} {text}: the approval was refused")
    ended = await sessions.wait_for_turn(waiting.session_id, waiting, timeout=_TURN_TIMEOUT_SECONDS)
    if ended.status is not TurnStatus.COMPLETED or ended.text != FINAL_TEXT:
        raise RuntimeError(f"{waiting.session_id} {text}: ended {ended.status}: {ended.error}")
    return ended


async def _run_session(
    stack: _Stack, options: LoadOptions, number: int, progress: _Progress, times: _TurnTimes
) -> None:
    session_id = f"load-{number:05d}"
    for turn in range(1, options.turns + 1):
        text = f"{session_id}/turn-{turn}: note that order 7 was checked"
        started = time.monotonic()
        progress.mid_turn += 1
        try:
            waiting = await stack.sessions.run_turn(session_id, text, timeout=_TURN_TIMEOUT_SECONDS)
            asked = time.monotonic()
            progress.mid_turn -= 1
            progress.parked += 1
            await asyncio.sleep(options.approval_delay_ms / 1000.0)
            progress.parked -= 1
            progress.mid_turn += 1
            approved = time.monotonic()
            await _approve(stack.sessions, waiting, text, times)
            times.latencies.append((asked - started) + (time.monotonic() - approved))
            progress.done_turns += 1
        except Exception as error:  # a failed turn is counted and shown, the run goes on
            progress.failed_turns += 1
            times.errors.append(f"{session_id} turn {turn}: {error!r}")
            return
        finally:
            progress.mid_turn -= 1


@dataclass(frozen=True)
class LoadFigures:
    """One row of the load table."""

    options: LoadOptions
    seconds: float
    turns: int
    failed: int
    latency: str
    approval_to_write: str
    engine_cpu: float
    worker_cpu: float
    rss_peak: int
    rss_end: int
    database_bytes: int
    queue: str
    errors: tuple[str, ...]
    offers: str = ""
    """With ``--count-messages``: the engine's task offers and the Workers' declines per turn."""


def _queue_figure(samples: Sequence[tuple[int, int]]) -> str:
    if not samples:
        return "n/a"
    waiting = [max(0, mid - inflight) for mid, inflight in samples]
    on_workers = [inflight for _, inflight in samples]
    return (
        f"waiting peak {max(waiting)} mean {statistics.fmean(waiting):.0f}; on Workers peak "
        f"{max(on_workers)} mean {statistics.fmean(on_workers):.0f}"
    )


async def run_load(options: LoadOptions, state_dir: Path) -> LoadFigures:
    """Run one load configuration on a fresh engine and Workers; its figures."""
    label = f"[{options.sessions} sessions, {options.workers}W x {options.task_slots}]"
    progress = _Progress(label, options.sessions * options.turns)
    times = _TurnTimes()
    async with _stack(options, state_dir) as stack:
        cpu = _CpuWindow(stack.engine.process.pid, [worker.pid for worker in stack.workers])
        with _sampling(stack, progress):
            counted = _counts_now(stack, options)
            cpu.start()
            await asyncio.gather(
                *(
                    _run_session(stack, options, number, progress, times)
                    for number in range(options.sessions)
                )
            )
            cpu.stop()
            counted = _counts_now(stack, options) - counted
        rss_end = _rss_bytes(stack.engine.process.pid)
        progress.rss_peak = max(progress.rss_peak, rss_end)
        database_bytes = _database_bytes(stack.database)
    marks = _read_marks(state_dir / "marks.tsv")
    gaps = [marks[text] - wall for text, wall in times.approvals.items() if text in marks]
    return LoadFigures(
        options,
        cpu.wall_seconds,
        progress.done_turns,
        progress.failed_turns,
        _percentiles(times.latencies),
        _percentiles(gaps),
        cpu.used.get("engine", 0.0),
        cpu.used.get("Workers", 0.0),
        progress.rss_peak,
        rss_end,
        database_bytes,
        _queue_figure(progress.queue_samples),
        tuple(times.errors[:5]),
        _offers_figure(counted, progress.done_turns),
    )


def _mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB"


def _cpu_figure(seconds: float, turns: int, wall: float) -> str:
    per_turn = f"{seconds / turns * 1000:.0f} ms/turn" if turns else "n/a"
    return f"{per_turn}, {seconds / wall * 100:.0f} % of a core" if wall > 0 else per_turn


def print_load_table(rows: Sequence[LoadFigures]) -> None:
    header = [
        "sessions",
        "Workers x slots",
        "turns (failed)",
        "turns/s",
        "turn p50/p99",
        "approval->write p50/p99",
        "engine CPU",
        "Worker CPU",
        "engine RSS peak/end",
        "database",
        "queue (sessions waiting for a slot; attempts on Workers)",
    ]
    table = [header]
    for row in rows:
        table.append(
            [
                str(row.options.sessions),
                f"{row.options.workers} x {row.options.task_slots}",
                f"{row.turns} ({row.failed})",
                f"{row.turns / row.seconds:.1f}" if row.seconds > 0 else "n/a",
                row.latency,
                row.approval_to_write,
                _cpu_figure(row.engine_cpu, row.turns, row.seconds),
                _cpu_figure(row.worker_cpu, row.turns, row.seconds),
                f"{_mib(row.rss_peak)} / {_mib(row.rss_end)}",
                _mib(row.database_bytes),
                row.queue,
            ]
        )
    _print_table(table)
    for row in rows:
        if row.offers:
            print(f"  engine messages ({row.options.describe()}): {row.offers}")
        for error in row.errors:
            print(f"  failed turn ({row.options.describe()}): {error}")


def _print_table(table: Sequence[Sequence[str]]) -> None:
    widths = [max(len(line[column]) for line in table) for column in range(len(table[0]))]
    print()
    for index, line in enumerate(table):
        print(" | ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
        if index == 0:
            print("-+-".join("-" * width for width in widths))


# --- parked ------------------------------------------------------------------------------------


async def _park(
    stack: _Stack, number: int, gate: asyncio.Semaphore, progress: _Progress
) -> TurnResult:
    session_id = f"parked-{number:05d}"
    async with gate:
        progress.mid_turn += 1
        try:
            result = await stack.sessions.run_turn(
                session_id,
                f"{session_id}/turn-1: note that order 7 was checked",
                timeout=_TURN_TIMEOUT_SECONDS,
            )
        except Exception:
            progress.failed_turns += 1
            raise
        finally:
            progress.mid_turn -= 1
        if result.status is TurnStatus.WAITING_FOR_PERSON:
            progress.parked += 1
            progress.done_turns += 1
        else:
            progress.failed_turns += 1
        return result


async def _search_waiting(client: AsyncClient, page_size: int, *, all_pages: bool) -> int:
    count, token = 0, ""
    while True:
        page = await client.search_flows(_WAITING_QUERY, page_size, token)
        count += len(page.flows)
        token = page.next_page_token
        if not all_pages or not token:
            return count


async def run_parked(options: LoadOptions, state_dir: Path) -> list[tuple[str, str]]:
    """Park ``options.parked`` sessions on an approval, measure, approve some at once."""
    progress = _Progress(f"[{options.parked} parked]", options.parked, "parked")
    figures: list[tuple[str, str]] = []
    async with _stack(options, state_dir) as stack:
        engine_pid = stack.engine.process.pid
        gate = asyncio.Semaphore(options.start_concurrency)
        with _sampling(stack, progress):
            started = time.monotonic()
            results = await asyncio.gather(
                *(_park(stack, number, gate, progress) for number in range(options.parked)),
                return_exceptions=True,
            )
            parking = time.monotonic() - started
        waiting = [
            r
            for r in results
            if isinstance(r, TurnResult) and r.status is TurnStatus.WAITING_FOR_PERSON
        ]
        errors = [repr(r) for r in results if isinstance(r, BaseException)]
        figures.append(
            (
                "sessions parked on an approval",
                f"{len(waiting)} of {options.parked} in {parking:.1f} s "
                f"({options.parked / parking:.1f} sessions/s)"
                + (f"; {len(errors)} failed, first: {errors[0]}" if errors else ""),
            )
        )
        figures.append(("engine RSS, all parked", _mib(_rss_bytes(engine_pid))))
        figures.append(("database, all parked", _mib(_database_bytes(stack.database))))
        idle = _CpuWindow(engine_pid, [worker.pid for worker in stack.workers])
        idle.start()
        await asyncio.sleep(options.idle_seconds)
        idle.stop()
        figures.append(
            (
                f"CPU while they wait ({options.idle_seconds:g} s)",
                f"engine {idle.used['engine'] / idle.wall_seconds * 100:.1f} % of a core, "
                f"Workers {idle.used['Workers'] / idle.wall_seconds * 100:.1f} %",
            )
        )
        started = time.monotonic()
        found = await _search_waiting(stack.client, _SEARCH_PAGE, all_pages=True)
        figures.append(
            (
                f"search_flows({_WAITING_QUERY!r}), every page of {_SEARCH_PAGE}",
                f"{found} found in {(time.monotonic() - started) * 1000:.0f} ms",
            )
        )
        started = time.monotonic()
        first = await _search_waiting(stack.client, 50, all_pages=False)
        figures.append(
            (
                "the same, first page of 50",
                f"{first} in {(time.monotonic() - started) * 1000:.0f} ms",
            )
        )
        figures.extend(await _approve_at_once(stack, options, waiting, state_dir))
    return figures


async def _approve_at_once(
    stack: _Stack, options: LoadOptions, waiting: Sequence[TurnResult], state_dir: Path
) -> list[tuple[str, str]]:
    chosen = list(waiting[: options.approve_at_once])
    times = _TurnTimes()
    texts = {r.session_id: f"{r.session_id}/turn-1: note that order 7 was checked" for r in chosen}
    accepted: list[float] = []
    started = time.monotonic()

    async def one(result: TurnResult) -> None:
        text = texts[result.session_id]
        times.approvals[text] = time.time()
        await stack.sessions.resolve_interrupt(
            result.session_id, result.pending_interrupts[0].interrupt_id, approved=True
        )
        accepted.append(time.monotonic() - started)
        ended = await stack.sessions.wait_for_turn(
            result.session_id, result, timeout=_TURN_TIMEOUT_SECONDS
        )
        if ended.status is not TurnStatus.COMPLETED:
            times.errors.append(f"{result.session_id}: {ended.status} {ended.error}")

    cpu = _CpuWindow(stack.engine.process.pid, [worker.pid for worker in stack.workers])
    cpu.start()
    outcomes = await asyncio.gather(*(one(result) for result in chosen), return_exceptions=True)
    cpu.stop()
    ended_after = time.monotonic() - started
    failures = [repr(o) for o in outcomes if isinstance(o, BaseException)] + times.errors
    marks = _read_marks(state_dir / "marks.tsv")
    gaps = [marks[text] - wall for text, wall in times.approvals.items() if text in marks]
    return [
        (
            f"approve {len(chosen)} at once: approvals accepted",
            f"all in {max(accepted, default=0.0) * 1000:.0f} ms",
        ),
        (
            "  their turns ended",
            f"all in {ended_after:.1f} s, {len(failures)} failed"
            + (f" (first: {failures[0]})" if failures else ""),
        ),
        ("  approval -> write running p50/p99", _percentiles(gaps)),
        (
            "  CPU meanwhile",
            f"engine {cpu.used['engine']:.1f} s, Workers {cpu.used['Workers']:.1f} s",
        ),
    ]


# --- command line ------------------------------------------------------------------------------


def _int_list(text: str) -> list[int]:
    values = [int(part) for part in text.split(",") if part.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give positive integers, comma-separated")
    return values


def parse_arguments(argv: Sequence[str] | None) -> tuple[list[LoadOptions], bool]:
    parser = argparse.ArgumentParser(
        description="Many concurrent sessions over several Workers on one local engine."
    )
    parser.add_argument("--sessions", type=_int_list, default=[100], help="e.g. 100,300,1000")
    parser.add_argument("--workers", type=_int_list, default=[1], help="e.g. 1,2,4")
    parser.add_argument(
        "--task-slots", type=_int_list, default=[8], help="per Worker (default 8, the command's)"
    )
    parser.add_argument("--turns", type=int, default=3, help="turns per session (default 3)")
    parser.add_argument("--model-latency-ms", type=float, default=100.0)
    parser.add_argument("--approval-delay-ms", type=float, default=500.0)
    parser.add_argument("--parked", type=int, default=0, help="the parked mode: N sessions")
    parser.add_argument("--approve-at-once", type=int, default=1000)
    parser.add_argument("--start-concurrency", type=int, default=200)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument(
        "--count-messages",
        action="store_true",
        help="count the tasks the engine offers and the Workers decline (costs engine CPU)",
    )
    arguments = parser.parse_args(argv)
    if arguments.turns < 1 or arguments.parked < 0 or arguments.start_concurrency < 1:
        parser.error("--turns and --start-concurrency must be positive, --parked not negative")
    configurations = [
        LoadOptions(
            sessions,
            workers,
            slots,
            arguments.turns,
            arguments.model_latency_ms,
            arguments.approval_delay_ms,
            arguments.parked,
            arguments.approve_at_once,
            arguments.start_concurrency,
            arguments.idle_seconds,
            arguments.count_messages,
        )
        for sessions, workers, slots in itertools.product(
            arguments.sessions, arguments.workers, arguments.task_slots
        )
    ]
    return configurations, arguments.parked > 0


def _load_average() -> str:
    try:
        return " ".join(f"{load:.2f}" for load in os.getloadavg())
    except OSError:
        return "unknown"


async def _main(configurations: Sequence[LoadOptions], parked: bool) -> None:
    rows: list[LoadFigures] = []
    for options in configurations:
        print(f"... {options.describe()}", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="dex-load-") as state_dir:
            if parked:
                figures = await run_parked(options, Path(state_dir))
                print(f"\nparked: {options.describe()}")
                _print_table([["figure", "value"], *([name, value] for name, value in figures)])
            else:
                rows.append(await run_load(options, Path(state_dir)))
    if rows:
        print_load_table(rows)
    print(
        f"\ncommand: {shlex.join(['python', *sys.argv])} | cores {os.cpu_count()}, load average "
        f"{_load_average()} at the end | {platform.python_implementation()} "
        f"{platform.python_version()} | engine: dex-local-engine serve, process-crash-safe"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run every configuration the command line names and print the figures; exit status 0."""
    configurations, parked = parse_arguments(argv)
    asyncio.run(_main(configurations, parked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
