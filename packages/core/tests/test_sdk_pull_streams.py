"""The pull Worker's linear stream reconcile against dex-python-sdk's own, state by state.

Each case builds a Worker runtime holding streams in random states (queue, registered, busy,
draining, half-closing; the task limit reached or not; a queue under reserve pressure) and runs
the SDK's ``PullWorkerRuntime._reconcile`` and ``reconcile_streams`` on two copies of it: the same
streams must retire and the same streams open, queue by queue.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pytest
from dex import _pull_worker
from dex._pull_worker import PullStream, PullWorkerRuntime
from dex_agents._sdk_pull_streams import (
    LINEAR_RECONCILE_SDK_VERSIONS,
    install_sdk_pull_stream_patches,
    reconcile_streams,
)

_QUEUES = ("worker-app-id", "session-flow", "other-flow")


class _FakeStream:
    """The attributes of a ``PullStream`` that the reconcile reads and writes."""

    try_retire = PullStream.try_retire

    def __init__(self, runtime: _FakeRuntime, stub: object, queue: str) -> None:
        self.runtime = runtime
        self.queue = queue
        self.stream_number = len(runtime.opened)
        runtime.opened.append(queue)
        self.is_busy = False
        self._is_registered = False
        self.is_draining = False
        self._is_retiring = False
        self._retirement_requested = asyncio.Event()
        self.is_half_closing = False
        self.run_task: asyncio.Task[None]

    # Both copies of a runtime must iterate their stream sets in one order (the order decides
    # which spare streams retire), so a stream hashes by its number, not its address.
    def __hash__(self) -> int:
        return self.stream_number

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _FakeStream) and other.stream_number == self.stream_number

    async def run(self) -> None:
        return None

    def on_done(self, completed: asyncio.Task[None]) -> None:
        return None


@dataclass
class _FakeRuntime:
    """The attributes of a ``PullWorkerRuntime`` that the reconcile reads."""

    queues: tuple[str, ...]
    idle_streams_per_queue: int
    max_concurrent_tasks: int
    _busy_tasks: int
    pressured: frozenset[str]
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _streams: set[Any] = field(default_factory=set)
    opened: list[str] = field(default_factory=list)

    def desired_idle_streams_per_queue(self, queue: str) -> int:
        return self.idle_streams_per_queue + int(queue in self.pressured)


def _runtime(seed: int) -> _FakeRuntime:
    rng = random.Random(seed)
    slots = rng.randint(1, 16)
    runtime = _FakeRuntime(
        queues=_QUEUES[: rng.randint(1, 3)],
        idle_streams_per_queue=rng.randint(1, slots),
        max_concurrent_tasks=slots,
        _busy_tasks=rng.choice((slots, rng.randint(0, slots))),
        pressured=frozenset(queue for queue in _QUEUES if rng.random() < 0.2),
    )
    for _ in range(rng.randint(0, 3 * slots)):
        stream = _FakeStream(runtime, None, rng.choice(runtime.queues))
        stream._is_registered = rng.random() < 0.7
        stream.is_busy = rng.random() < 0.3
        stream.is_draining = rng.random() < 0.15
        stream.is_half_closing = rng.random() < 0.1
        runtime._streams.add(stream)
    return runtime


def _outcome(runtime: _FakeRuntime) -> tuple[list[tuple[int, bool, bool, bool]], list[str]]:
    streams = sorted(runtime._streams, key=lambda stream: stream.stream_number)
    states = [
        (
            stream.stream_number,
            stream.is_draining,
            stream._is_retiring,
            stream._retirement_requested.is_set(),
        )
        for stream in streams
    ]
    return states, runtime.opened


@pytest.mark.parametrize("seed", range(400))
async def test_the_linear_reconcile_retires_and_opens_what_the_sdks_does(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_pull_worker, "PullStream", _FakeStream)
    theirs, ours = _runtime(seed), _runtime(seed)
    _SDK_RECONCILE(theirs, None)  # type: ignore[arg-type]
    reconcile_streams(ours, None)  # type: ignore[arg-type]
    assert _outcome(ours) == _outcome(theirs)


async def test_a_stopping_worker_neither_retires_nor_opens_streams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_pull_worker, "PullStream", _FakeStream)
    runtime = _runtime(7)
    before = _outcome(runtime)
    runtime._stopping.set()
    reconcile_streams(runtime, None)  # type: ignore[arg-type]
    assert _outcome(runtime) == before


async def test_spare_streams_beyond_the_desired_idle_count_retire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_pull_worker, "PullStream", _FakeStream)
    runtime = _FakeRuntime(
        queues=("session-flow",),
        idle_streams_per_queue=1,
        max_concurrent_tasks=4,
        _busy_tasks=0,
        pressured=frozenset(),
    )
    streams = [_FakeStream(runtime, None, "session-flow") for _ in range(3)]
    for stream in streams:
        stream._is_registered = True
    runtime._streams.update(streams)
    reconcile_streams(runtime, None)  # type: ignore[arg-type]
    # Two retire, one stays idle, and no stream opens: the queue has its one idle stream.
    assert sorted(stream.is_draining for stream in streams) == [False, True, True]
    assert len(runtime.opened) == 3


def test_the_reconcile_is_replaced_for_this_sdk() -> None:
    assert metadata.version("dex-python-sdk") in LINEAR_RECONCILE_SDK_VERSIONS, (
        "a new dex-python-sdk: compare its PullWorkerRuntime._reconcile with reconcile_streams, "
        "then add its version to LINEAR_RECONCILE_SDK_VERSIONS or drop the patch"
    )
    assert install_sdk_pull_stream_patches()
    assert PullWorkerRuntime._reconcile is reconcile_streams


def _sdk_reconcile() -> Any:
    """``PullWorkerRuntime._reconcile`` as the SDK defines it, from a fresh copy of its module (a
    Worker in this process may have replaced the method already)."""
    import importlib.util

    spec = importlib.util.find_spec("dex._pull_worker")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # The copy's _reconcile opens its own module's PullStream: the stand-in the test patched in.
    reconcile = module.PullWorkerRuntime._reconcile

    def run(runtime: Any, stub: Any) -> None:
        module.PullStream = _pull_worker.PullStream
        reconcile(runtime, stub)

    return run


_SDK_RECONCILE = _sdk_reconcile()
