"""The event loop ``dex-local-engine serve`` runs on, and its garbage collector settings.

Python gRPC's asyncio server spends much of each message in the event loop, so the loop's own
cost shows in every call: uvloop (libuv) took 8-15 % of the engine's CPU per turn off asyncio's
default loop, side by side in ``benchmarks/turn_shape_floor_ab.py``. uvloop is a dependency on
every platform it has wheels for and the default there; where it is missing (Windows) the engine
runs asyncio's loop. ``DEX_LOCAL_ENGINE_EVENT_LOOP=asyncio`` forces asyncio's loop (to compare, or
to rule uvloop out); ``uvloop`` insists on uvloop.

uvloop runs a ``call_later`` callback up to about a millisecond before ``time.time()`` reaches the
time it was meant for (libuv counts whole milliseconds on a coarse clock), so nothing in the engine
may take a timer's callback as proof that a wall-clock time has passed: the scheduler arms a Timer
again when it fired early (``StepScheduler.arm_timers``).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import os
from collections.abc import Callable, Coroutine, Mapping
from enum import StrEnum
from typing import Any, Final, TypeVar

from dex_local_engine.exceptions import EngineConfigurationError

__all__ = [
    "EVENT_LOOP_ENV",
    "EventLoopKind",
    "choose_event_loop",
    "freeze_startup_objects",
    "run_on_event_loop",
]

EVENT_LOOP_ENV: Final = "DEX_LOCAL_ENGINE_EVENT_LOOP"
"""Environment variable that picks the loop: ``uvloop`` (the default where installed) or ``asyncio``."""

_YOUNG_GENERATION_THRESHOLD: Final = 100_000
"""Allocations between young-generation collections (CPython's default is 700).

Every gRPC message allocates hundreds of short-lived objects; at 700 the collector runs several
times per message and walks the young objects each time."""

_ResultT = TypeVar("_ResultT")


class EventLoopKind(StrEnum):
    """Which event loop implementation the engine runs on."""

    UVLOOP = "uvloop"
    ASYNCIO = "asyncio"


def choose_event_loop(
    environ: Mapping[str, str] | None = None,
) -> tuple[EventLoopKind, Callable[[], asyncio.AbstractEventLoop]]:
    """The loop to serve on: uvloop unless it is missing or ``DEX_LOCAL_ENGINE_EVENT_LOOP`` says asyncio.

    Raises:
        EngineConfigurationError: (a ValueError) When ``DEX_LOCAL_ENGINE_EVENT_LOOP`` names no known loop, or names uvloop
            where it is not installed.

    Example:
        >>> choose_event_loop({"DEX_LOCAL_ENGINE_EVENT_LOOP": "asyncio"})[0]
        <EventLoopKind.ASYNCIO: 'asyncio'>
    """
    settings = os.environ if environ is None else environ
    requested = settings.get(EVENT_LOOP_ENV, "").strip().lower()
    if requested and requested not in set(EventLoopKind):
        known = ", ".join(kind.value for kind in EventLoopKind)
        raise EngineConfigurationError(f"{EVENT_LOOP_ENV}={requested!r}: expected one of {known}")
    if requested == EventLoopKind.ASYNCIO:
        return EventLoopKind.ASYNCIO, asyncio.new_event_loop
    try:
        uvloop: Any = importlib.import_module("uvloop")
    except ImportError:
        if requested == EventLoopKind.UVLOOP:
            raise EngineConfigurationError(
                f"{EVENT_LOOP_ENV}=uvloop: uvloop is not installed"
            ) from None
        return EventLoopKind.ASYNCIO, asyncio.new_event_loop
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return EventLoopKind.UVLOOP, factory


def run_on_event_loop(
    main: Coroutine[Any, Any, _ResultT], loop_factory: Callable[[], asyncio.AbstractEventLoop]
) -> _ResultT:
    """Run ``main`` to completion on a new loop from ``loop_factory`` (``asyncio.run`` for 3.11)."""
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main)


def freeze_startup_objects() -> None:
    """Keep the objects alive after start-up out of every later collection, and collect less often.

    Called once the engine has loaded its runs: modules, protobuf descriptors and loaded state are
    long-lived, so the collector need not walk them again (6 % of the engine's CPU per turn
    together with the threshold, side by side in ``turn_shape_floor_ab.py``). Cyclic garbage is
    still collected, only in larger batches.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(_YOUNG_GENERATION_THRESHOLD, middle, old)
