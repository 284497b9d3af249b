"""Count the messages an engine process handles, by kind, for ``session_turns.py --count-messages``.

``install_hook(directory)`` writes a ``sitecustomize`` that, in a ``dex-local-engine serve``
process started with ``directory`` on ``PYTHONPATH`` and ``COUNTS_FILE_ENV`` set, counts:

- every gRPC call by method (a server interceptor): ``call ReadStream``, ``call InvokeRPC``, ...;
- every Worker stream frame the engine reads, by what it carries: ``frame in execute
  stream_write``, ``frame in execute result``, ``frame in wait_for heartbeat``, ...;
- every frame it writes to a Worker: ``frame out task execute``, ``frame out task rpc``, ...;

with the serialized bytes of each frame kind. On ``SIGUSR1`` the engine writes the counts so far
to the file as JSON, so a benchmark reads them before and after the turns it measures
(:func:`read_counts`). Counting costs engine CPU: time nothing in a counting run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Final

__all__ = ["COUNTS_FILE_ENV", "engine_hook_environment", "install_hook", "read_counts"]

COUNTS_FILE_ENV: Final = "DEX_AGENTS_BENCHMARK_ENGINE_COUNTS_FILE"

_HOOK: Final = f"""
import os, sys
_path = os.environ.get({COUNTS_FILE_ENV!r})
if _path and sys.argv[1:2] == ["serve"]:
    import collections, json, signal
    import grpc, grpc.aio

    _counts = collections.Counter()
    _bytes = collections.Counter()
    _dumps = [0]

    class _CountingInterceptor(grpc.aio.ServerInterceptor):
        async def intercept_service(self, continuation, details):
            _counts["call " + details.method.rsplit("/", 1)[-1]] += 1
            return await continuation(details)

    def _patch_pull_dispatch():
        pull = sys.modules["dex_local_engine.pull_dispatch"]
        handle = pull.PullDispatcher._handle_request

        def counting_handle(self, stream, request):
            if hasattr(request, "WhichOneof"):
                kind = request.WhichOneof("frame")
                if kind == "task_frame":
                    method = request.task_frame.WhichOneof("output") or "empty"
                    detail = ""
                    if method in ("wait_for", "execute"):
                        detail = getattr(request.task_frame, method).WhichOneof("output") or ""
                    kind = f"{{method}} {{detail}}".strip()
                _counts["frame in " + kind] += 1
                _bytes["frame in " + kind] += request.ByteSize()
            return handle(self, stream, request)

        pull.PullDispatcher._handle_request = counting_handle
        write_frames = pull._write_frames

        class _CountingContext:
            def __init__(self, context):
                self._context = context

            async def write(self, response):
                kind = response.WhichOneof("frame") or "empty"
                if kind == "task":
                    kind = "task " + (response.task.WhichOneof("request") or "empty")
                _counts["frame out " + kind] += 1
                _bytes["frame out " + kind] += response.ByteSize()
                return await self._context.write(response)

            def __getattr__(self, name):
                return getattr(self._context, name)

        async def counting_write_frames(stream, context):
            return await write_frames(stream, _CountingContext(context))

        pull._write_frames = counting_write_frames

    _server = grpc.aio.server

    def _counting_server(*args, **kwargs):
        kwargs["interceptors"] = [*kwargs.get("interceptors", ()), _CountingInterceptor()]
        _patch_pull_dispatch()
        return _server(*args, **kwargs)

    grpc.aio.server = _counting_server

    def _dump(signal_number, frame):
        _dumps[0] += 1
        document = {{"dump": _dumps[0], "counts": dict(_counts), "bytes": dict(_bytes)}}
        with open(_path + ".partial", "w") as file:
            json.dump(document, file)
        os.replace(_path + ".partial", _path)

    signal.signal(signal.SIGUSR1, _dump)
"""

_READ_TIMEOUT_SECONDS: Final = 10.0


def install_hook(directory: Path) -> Path:
    """Write the counting ``sitecustomize.py`` into ``directory``; returns ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(_HOOK)
    return directory


@contextlib.contextmanager
def engine_hook_environment(hook_dir: Path, env_name: str, output_file: Path) -> Iterator[None]:
    """While inside, an engine this process starts loads ``hook_dir``'s ``sitecustomize`` and
    finds ``output_file`` in ``env_name``; afterwards the environment is as before, so a Worker
    child started later runs without the hook.

    Example::

        with engine_hook_environment(install_hook(scratch / "hook"), COUNTS_FILE_ENV, counts):
            await stack.__aenter__()
    """
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", env_name)}
    os.environ["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(hook_dir), saved["PYTHONPATH"]) if part
    )
    os.environ[env_name] = str(output_file)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def read_counts(pid: int, path: Path) -> tuple[Counter[str], Counter[str]]:
    """Ask engine ``pid`` for its counts so far (``SIGUSR1``) and read them from ``path``.

    Returns:
        Messages by kind, and their serialized bytes by kind (frames only).

    Raises:
        TimeoutError: When the engine did not write them within 10 seconds.
    """
    previous = _dump_number(path)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + _READ_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if _dump_number(path) > previous:
            document = json.loads(path.read_text())
            return Counter(document["counts"]), Counter(document["bytes"])
        time.sleep(0.01)
    raise TimeoutError(f"engine {pid} wrote no message counts to {path}")


def _dump_number(path: Path) -> int:
    try:
        number: int = json.loads(path.read_text())["dump"]
    except (OSError, ValueError, KeyError):
        return 0
    return number
