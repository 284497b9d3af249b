"""``dex-agents worker module:attribute [...]``: a Worker process for an application's Flows.

Each import path names a Flow, a list or tuple of Flows, or a factory (a callable without
arguments that returns either). The process serves them all with one pull Worker, prints one
line once its queues are registered, and stops on SIGTERM or SIGINT: running Steps get
``--drain-timeout`` seconds to finish, then they are cancelled and Dex handles the attempt as it
handles a Worker that went away (a read or idempotent tool call and a model call are retried on
another Worker; a non-idempotent write that may have run records ``outcome_unknown``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import IntEnum
from pathlib import Path
from typing import Any, Final, TextIO

from dex import BlobCacheConfig, Flow, Registry, open_blob_cache

from dex_agents._codec_registry import agent_codec_registry
from dex_agents._owned_directories import owned_temp_directory
from dex_agents._worker_gc import freeze_worker_startup_objects
from dex_agents.exceptions import DexAgentsError
from dex_agents.testing._pull_worker import new_pull_worker

__all__ = [
    "DEFAULT_WORKER_ADDRESS",
    "READY_LINE_PREFIX",
    "SERVER_ADDRESS_ENV",
    "WorkerExitStatus",
    "WorkerImportError",
    "WorkerOptions",
    "load_flows",
    "run_worker",
]

DEFAULT_WORKER_ADDRESS: Final = "127.0.0.1:8801"
"""The engine a Worker connects to without ``--address`` (or ``DEX_SERVER_ADDRESS``)."""

SERVER_ADDRESS_ENV: Final = "DEX_SERVER_ADDRESS"
"""The environment variable that names the engine when ``--address`` is not given."""

READY_LINE_PREFIX: Final = "dex-agents worker ready"
"""How the one line the Worker prints once it is registered starts."""

_log = logging.getLogger("dex_agents.worker")


class WorkerExitStatus(IntEnum):
    """The exit statuses of ``dex-agents worker``."""

    STOPPED = 0
    """Stopped by SIGTERM or SIGINT after draining (or cancelling) its running Steps."""
    FAILED = 1
    """The Worker stopped by itself with an error after it was ready."""
    USAGE = 2
    """The command line is wrong (argparse's status), such as no import path or a bad option."""
    BAD_IMPORT_PATH = 3
    """An import path names no Flows: its module or attribute is missing, it fails to import,
    or it is not a Flow, a list of Flows, or a factory of them."""
    NOT_REGISTERED = 4
    """The Worker could not reach the engine or register its queues."""


class WorkerImportError(DexAgentsError):
    """An import path of ``dex-agents worker`` names no Flows; the message says why."""


@dataclass(frozen=True)
class WorkerOptions:
    """What ``dex-agents worker`` was asked to do.

    Attributes:
        import_paths: ``module:attribute`` paths naming the Flows.
        server_address: The engine's ``host:port``.
        task_slots: Tasks the Worker runs at once (the SDK's ``max_concurrent_tasks``); the SDK
            keeps one of them for RPCs, so ``task_slots - 1`` Steps run at once and the rest
            wait in the engine for a free slot.
        blob_cache: The blob cache directory; ``None`` uses a temporary one.
        blob_cache_bytes: The blob cache's size.
        drain_timeout: How long running Steps may finish after SIGTERM or SIGINT.
        registration_timeout: How long to wait for the engine to register the Worker.
    """

    import_paths: tuple[str, ...]
    server_address: str = DEFAULT_WORKER_ADDRESS
    task_slots: int = 8
    blob_cache: Path | None = None
    blob_cache_bytes: int = 64 * 1024 * 1024
    drain_timeout: timedelta = timedelta(seconds=30)
    registration_timeout: timedelta = timedelta(seconds=30)


def load_flows(import_paths: Sequence[str]) -> list[Flow[Any]]:
    """Import the Flows that ``import_paths`` name, in order, without duplicates.

    The current directory is importable, as for ``python -m``.

    Raises:
        WorkerImportError: A path is not ``module:attribute``, its module or attribute is
            missing or fails to import, or the value is not a Flow, a list of Flows, or a
            factory that returns them; or two Flows share a Flow type.

    Example:
        >>> [flow.get_flow_type() for flow in load_flows(["dex_agents._demo:build_demo_flow"])]
        ['SupportAgentDemo']
    """
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    flows: list[Flow[Any]] = []
    for path in import_paths:
        for flow in _flows_of(path, _resolve(path)):
            if not any(flow is known for known in flows):
                flows.append(flow)
    types = [flow.get_flow_type() for flow in flows]
    duplicates = sorted({name for name in types if types.count(name) > 1})
    if duplicates:
        raise WorkerImportError(f"two Flows share the Flow type {', '.join(duplicates)}")
    return flows


def _resolve(path: str) -> object:
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name or not attribute:
        raise WorkerImportError(
            f"{path!r} is not an import path: write module:attribute, such as myapp.agents:flow"
        )
    try:
        value: object = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            raise WorkerImportError(
                f"{path}: no module named {error.name!r} (run from the directory that holds it, "
                "or install it)"
            ) from error
        raise WorkerImportError(f"{path}: importing {module_name} failed: {error!r}") from error
    except Exception as error:
        raise WorkerImportError(f"{path}: importing {module_name} failed: {error!r}") from error
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise WorkerImportError(f"{path}: {module_name} has no attribute {attribute!r}")
        value = getattr(value, part)
    return value


def _flows_of(path: str, value: object) -> list[Flow[Any]]:
    if isinstance(value, Flow):
        return [value]
    if isinstance(value, list | tuple):
        return _flow_list(path, value)
    if callable(value) and not isinstance(value, type):
        try:
            made = value()
        except Exception as error:
            raise WorkerImportError(f"{path}: the factory raised {error!r}") from error
        if isinstance(made, Flow):
            return [made]
        if isinstance(made, list | tuple):
            return _flow_list(path, made)
        raise WorkerImportError(
            f"{path}: the factory returned {type(made).__name__}, not a Flow or a list of Flows"
        )
    what = f"the class {value.__name__}" if isinstance(value, type) else type(value).__name__
    raise WorkerImportError(f"{path} is {what}, not a Flow, a list of Flows, or a factory of them")


def _flow_list(path: str, values: list[Any] | tuple[Any, ...]) -> list[Flow[Any]]:
    if not values:
        raise WorkerImportError(f"{path} is an empty list: it names no Flow")
    for index, item in enumerate(values):
        if not isinstance(item, Flow):
            raise WorkerImportError(f"{path}[{index}] is {type(item).__name__}, not a Flow")
    return list(values)


async def run_worker(options: WorkerOptions, output: TextIO = sys.stdout) -> WorkerExitStatus:
    """Serve the Flows until SIGTERM or SIGINT; returns the exit status.

    Raises:
        WorkerImportError: An import path names no Flows (the caller reports it).
    """
    flows = load_flows(options.import_paths)
    registry = Registry(flows, agent_codec_registry(), allow_async_handlers=True)
    with contextlib.ExitStack() as resources:
        directory = options.blob_cache
        if directory is None:
            # Named for this process: a Worker that is SIGKILLed leaves it to the next one.
            directory = owned_temp_directory("dex-agents-worker-")
            resources.callback(shutil.rmtree, directory, ignore_errors=True)
        cache = open_blob_cache(BlobCacheConfig(str(directory), options.blob_cache_bytes))
        resources.callback(cache.close)
        worker = new_pull_worker(
            registry,
            cache,
            options.server_address,
            flows=flows,
            max_concurrent_tasks=options.task_slots,
            stop_drain_timeout=options.drain_timeout,
        )
        stop = asyncio.Event()
        _on_stop_signals(stop)
        serving = asyncio.create_task(worker.start())
        try:
            await worker.wait_pull_registered(options.registration_timeout.total_seconds())
        except BaseException as failure:
            await worker.stop()
            await asyncio.gather(serving, return_exceptions=True)
            _log.error("the Worker did not register with %s: %s", options.server_address, failure)
            return WorkerExitStatus.NOT_REGISTERED
        freeze_worker_startup_objects()
        names = ", ".join(flow.get_flow_type() for flow in flows)
        output.write(
            f"{READY_LINE_PREFIX}: serving {names} on {options.server_address} "
            f"({options.task_slots} task slots, pid {os.getpid()})\n"
        )
        output.flush()
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if serving.done():
            stopping.cancel()
            error = serving.exception() if not serving.cancelled() else None
            _log.error("the Worker stopped: %r", error)
            return WorkerExitStatus.FAILED
        _log.info("stopping: running Steps get %s s", options.drain_timeout.total_seconds())
        await worker.stop()
        await asyncio.gather(serving, return_exceptions=True)
        return WorkerExitStatus.STOPPED


def _on_stop_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
