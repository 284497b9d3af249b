"""Worker children forked from a warm parent that has already imported their framework.

A Worker child spends most of its start importing its agent framework (seconds on a loaded
machine), and a test that SIGKILLs its Worker starts it at least twice. A fork server is a
Python process per Worker module, directory and preload environment that imports the module and
runs its ``preload_worker()`` once (the scenario Worker builds its Flows in a throwaway directory,
which imports everything the framework imports lazily), then forks a child per request. The
child takes its own process group, environment and log files and runs the module as
``__main__``, as ``python -m`` would: a real process that the test SIGKILLs and restarts.

The server forks only while it is the only thread of its process (checked after preloading) and
before it has opened any gRPC channel or event loop; a module whose preload starts a thread
cannot be forked safely, and its Workers start as ``python -m`` children instead. The server
dies with the test process (the orphan guard of ``start_child``) and each child with the server,
so no child outlives the test process. The server keeps a dead child as a zombie until the test
side has read its exit status, so the child's process ID is never reused while the test may
still signal it. The local engine of ``EngineProcess.start_local`` starts the same way: its module
``dex_local_engine.cli`` forked with the command's arguments (``argv``) from a server of its own.
``DEX_AGENTS_TEST_FORK_SERVER=0`` turns fork servers off.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import hashlib
import importlib
import json
import logging
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dex_agents._worker_gc import worker_gc_freeze_enabled
from dex_agents.exceptions import DexAgentsError
from dex_agents.testing._child_process import kill_process_group, start_child, tail

__all__ = ["FORK_SERVER_ENV", "PRELOAD_HOOK", "ForkServerError", "ForkedProcess", "fork_child"]

FORK_SERVER_ENV = "DEX_AGENTS_TEST_FORK_SERVER"
"""Set to ``0`` to start every Worker child as ``python -m`` instead of forking it."""

PRELOAD_HOOK = "preload_worker"
"""The optional function of a Worker module that the fork server calls once before forking."""

# Not part of a server's key. pytest sets PYTEST_CURRENT_TEST for every test phase; it must not
# make each test a fork server of its own. LiteLLM's import sets TIKTOKEN_CACHE_DIR to its own
# tokenizer directory whatever it was, so a server that imports LiteLLM gets the same value
# either way: once a test imported LiteLLM, every server would otherwise start (and preload) anew.
_VOLATILE_ENV = frozenset({"PYTEST_CURRENT_TEST", "TIKTOKEN_CACHE_DIR"})
_SERVER_START_TIMEOUT_SECONDS = 120.0
_REPLY_TIMEOUT_SECONDS = 30.0
_SERVER_MAIN = "from dex_agents.testing._fork_server import _server_main; _server_main()"
_PR_SET_PDEATHSIG = 1
# How long one read of the server's messages may hold the lock: a thread waiting for a child's
# exit (``WorkerProcess.stop``) must not stall the event loop's polls of the others.
_LOCK_HOLD_SECONDS = 0.05

_logger = logging.getLogger(__name__)


class ForkServerError(DexAgentsError, RuntimeError):
    """A fork server did not start, or could not fork a child."""


class ForkedProcess:
    """A child forked by a fork server, with the parts of ``subprocess.Popen`` tests use.

    The child leads its own process group. Its exit status comes from the fork server (its
    parent), which keeps it unreaped until this side has read the status.
    """

    def __init__(self, server: _ForkServer, pid: int) -> None:
        self._server = server
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit status (``-N`` for signal ``N``), or ``None`` while it runs."""
        if self.returncode is None:
            self.returncode = self._server.exit_status(self.pid, timeout=0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to exit and return its status.

        Raises:
            subprocess.TimeoutExpired: It still runs after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        returncode = self.poll()
        while returncode is None:
            remaining = 1.0 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout or 0.0)
            returncode = self._server.exit_status(self.pid, timeout=min(remaining, 1.0))
        self.returncode = returncode
        return returncode

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the child unless it has exited."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL the child unless it has exited."""
        self.send_signal(signal.SIGKILL)


def fork_child(
    worker_module: str,
    *,
    preload_env: Mapping[str, str],
    cwd: Path | None,
    env: Mapping[str, str],
    stdout_path: Path,
    stderr_path: Path,
    argv: Sequence[str] = (),
) -> ForkedProcess | None:
    """Fork a child that runs ``worker_module`` as ``__main__`` with ``env`` in ``cwd`` and the
    arguments ``argv`` (``sys.argv[1:]``).

    The fork server of ``worker_module``, ``cwd``, ``preload_env`` and this process's
    environment is started on first use with ``preload_env`` added to this process's
    environment; it imports the module and calls its ``preload_worker()`` if it has one.

    Returns:
        The child, or ``None`` when fork servers are off (``DEX_AGENTS_TEST_FORK_SERVER=0``) or
        this one failed (the reason is logged): the caller starts ``python -m`` instead.
    """
    if os.environ.get(FORK_SERVER_ENV, "1") == "0":
        return None
    key = _server_key(worker_module, cwd, preload_env)
    if key in _SERVERS and _SERVERS[key] is None:
        return None  # failed before; its reason was logged then
    try:
        server = _SERVERS.get(key)
        if server is None or not server.is_running:
            if threading.current_thread() is not threading.main_thread():
                # A server dies with the thread that started it (its parent-death signal), and
                # it is kept for later tests: only the main thread, which lives as long as the
                # test process, starts one.
                return None
            server = _ForkServer.start(
                worker_module,
                cwd=cwd,
                env={**_stable_environ(), **preload_env},
                state_dir=stdout_path.parent.parent / f"fork-server-{key[:12]}",
            )
            _SERVERS[key] = server
        return server.fork(
            env, cwd=cwd, stdout_path=stdout_path, stderr_path=stderr_path, argv=argv
        )
    except ForkServerError as error:
        _logger.warning(
            "Worker children of %s start as `python -m` instead of by fork: %s",
            worker_module,
            error,
        )
        failed = _SERVERS.get(key)
        if failed is not None:
            failed.close()
        _SERVERS[key] = None
        return None


class _ForkServer:
    """The test side of one fork server: its process and the socket to it."""

    def __init__(
        self, process: subprocess.Popen[bytes], connection: socket.socket, stderr_path: Path
    ) -> None:
        self._process = process
        self._connection = connection
        self._stderr_path = stderr_path
        self._lock = threading.Lock()
        self._buffer = b""
        self._replies: list[dict[str, Any]] = []
        self._exits: dict[int, int] = {}
        self._closed = False

    @property
    def is_running(self) -> bool:
        """Whether the server still answers."""
        return not self._closed and self._process.poll() is None

    @classmethod
    def start(
        cls, worker_module: str, *, cwd: Path | None, env: Mapping[str, str], state_dir: Path
    ) -> _ForkServer:
        """Start a server and wait until it has preloaded ``worker_module``.

        Raises:
            ForkServerError: It exited, reported an error or was not ready in time.
        """
        ours, theirs = socket.socketpair()
        stderr_path = state_dir / "stderr.log"
        try:
            process = start_child(
                [sys.executable, "-c", _SERVER_MAIN, str(theirs.fileno()), worker_module],
                stdout_path=state_dir / "stdout.log",
                stderr_path=stderr_path,
                cwd=cwd,
                env=env,
                own_process_group=True,
                pass_fds=(theirs.fileno(),),
            )
        finally:
            theirs.close()
        server = cls(process, ours, stderr_path)
        try:
            server._reply(_SERVER_START_TIMEOUT_SECONDS)
        except ForkServerError:
            server.close()
            raise
        return server

    def fork(
        self,
        env: Mapping[str, str],
        *,
        cwd: Path | None,
        stdout_path: Path,
        stderr_path: Path,
        argv: Sequence[str] = (),
    ) -> ForkedProcess:
        """Ask the server for a child with ``env`` and ``argv``, its output appended to the two
        files.

        Raises:
            ForkServerError: The server died or could not fork.
        """
        stdout_path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._send(
                {
                    "env": dict(env),
                    "cwd": str(cwd or Path.cwd()),
                    "stdout": str(stdout_path),
                    "stderr": str(stderr_path),
                    "argv": list(argv),
                }
            )
        return ForkedProcess(self, int(self._reply(_REPLY_TIMEOUT_SECONDS)["started"]))

    def exit_status(self, pid: int, *, timeout: float) -> int | None:
        """The exit status of child ``pid``, waiting up to ``timeout`` s; ``None``: running."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if pid in self._exits:
                    return self._exits[pid]
                if self._closed:
                    # The server is gone, and its children died with it (their parent-death signal).
                    return -signal.SIGKILL
                self._receive(min(_LOCK_HOLD_SECONDS, max(0.0, deadline - time.monotonic())))
            if time.monotonic() >= deadline and pid not in self._exits:
                return None

    def close(self) -> None:
        """Kill the server; its children die with it."""
        self._closed = True
        self._connection.close()
        kill_process_group(self._process)

    def _send(self, message: Mapping[str, Any]) -> None:
        try:
            self._connection.sendall(json.dumps(message).encode() + b"\n")
        except OSError as error:
            raise ForkServerError(f"the fork server is gone ({error}); {self._stderr()}") from None

    def _reply(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self._replies:
                    reply = self._replies.pop(0)
                    if "error" in reply:
                        raise ForkServerError(str(reply["error"]))
                    return reply
                if self._closed:
                    raise ForkServerError(f"the fork server exited; {self._stderr()}")
                if time.monotonic() >= deadline:
                    raise ForkServerError(f"no answer within {timeout:g} s; {self._stderr()}")
                self._receive(min(_LOCK_HOLD_SECONDS, max(0.0, deadline - time.monotonic())))

    def _receive(self, timeout: float) -> None:
        # Called with the lock held: reads what the server sent within ``timeout`` seconds.
        with selectors.DefaultSelector() as selector:
            selector.register(self._connection, selectors.EVENT_READ)
            if not selector.select(timeout):
                return
        try:
            data = self._connection.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._closed = True
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            message: dict[str, Any] = json.loads(line)
            if "exited" in message:
                pid = int(message["exited"])
                self._exits[pid] = int(message["returncode"])
                # Now that its status is known here, the server may reap it (freeing its pid).
                with contextlib.suppress(ForkServerError):
                    self._send({"release": pid})
            else:
                self._replies.append(message)

    def _stderr(self) -> str:
        return f"its stderr: {tail(self._stderr_path) or '(empty)'}"


_SERVERS: dict[str, _ForkServer | None] = {}


@atexit.register
def _close_servers() -> None:
    for server in _SERVERS.values():
        if server is not None:
            server.close()
    _SERVERS.clear()


def _stable_environ() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name not in _VOLATILE_ENV}


def _server_key(worker_module: str, cwd: Path | None, preload_env: Mapping[str, str]) -> str:
    # The environment the server imports under is part of the key: a test that changed this
    # process's environment gets a server that imported under the change.
    parts = [sys.executable, worker_module, str(cwd or Path.cwd())]
    parts += sorted(f"{name}={value}" for name, value in _stable_environ().items())
    parts += sorted(f"+{name}={value}" for name, value in preload_env.items())
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


# The server process: everything below runs there, or in a child it forked.


def _server_main() -> None:
    """Preload the Worker module of ``sys.argv[2]``, then fork a child per request."""
    connection = socket.socket(fileno=int(sys.argv[1]))
    worker_module = sys.argv[2]
    sys.path[0] = os.getcwd()  # as `python -m` puts it
    sys.argv = [worker_module]
    try:
        hook = getattr(importlib.import_module(worker_module), PRELOAD_HOOK, None)
        if hook is not None:
            hook()
    except BaseException:  # SystemExit too: report any failure to the test side
        _reply(
            connection, {"error": f"preloading {worker_module} failed: {traceback.format_exc()}"}
        )
        return
    threads = os.listdir("/proc/self/task") if sys.platform.startswith("linux") else []
    if threading.active_count() != 1 or len(threads) > 1:
        _reply(
            connection,
            {
                "error": f"preloading {worker_module} started threads ({len(threads)} in all), "
                "so forking its process is unsafe"
            },
        )
        return
    if worker_gc_freeze_enabled():
        # Frozen once here, what the preload left alive stays out of every child's collections:
        # a child's Worker skips its own start-up collection of them (freeze_worker_startup_objects
        # does nothing once objects are frozen), and no child's collector writes to (so copies)
        # the pages it shares with this process.
        gc.collect()
        gc.freeze()
    server_pid = os.getpid()
    _reply(connection, {"ready": server_pid})
    request = _serve(connection)
    _run_child(request, server_pid=server_pid)


def _serve(connection: socket.socket) -> dict[str, Any]:
    """Fork a child per request and report its exit; returns only in a forked child."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
    signal.set_wakeup_fd(wake_write)
    running: set[int] = set()
    buffer = b""
    selector = selectors.DefaultSelector()
    selector.register(connection, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select(timeout=1.0):
            if key.fileobj == wake_read:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 4096)
                continue
            data = connection.recv(65536)
            if not data:  # the test process closed its side: it is done with us
                for pid in running:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
                sys.exit(0)
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                request: dict[str, Any] = json.loads(line)
                if "release" in request:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(int(request["release"]), 0)
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    selector.close()
                    for fd in (wake_read, wake_write):
                        os.close(fd)
                    connection.close()
                    return request
                running.add(pid)
                _reply(connection, {"started": pid})
        for pid in sorted(running):
            status = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if status is not None and status.si_pid == pid:
                running.discard(pid)
                killed = status.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
                returncode = -status.si_status if killed else status.si_status
                _reply(connection, {"exited": pid, "returncode": returncode})


def _run_child(request: Mapping[str, Any], *, server_pid: int) -> None:
    """Become the Worker child of ``request`` and run its module as ``__main__``."""
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes

        # Die with the server, which dies with the test process (its orphan guard).
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != server_pid:
        os._exit(1)
    _redirect(0, os.open(os.devnull, os.O_RDONLY))
    _redirect(1, os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    _redirect(2, os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv[1:] = request.get("argv", [])
    # Run the module's code afresh as __main__, as `python -m` would (its imports stay warm).
    sys.modules.pop(sys.argv[0], None)
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)


def _redirect(target: int, fd: int) -> None:
    os.dup2(fd, target)
    os.close(fd)


def _reply(connection: socket.socket, message: Mapping[str, Any]) -> None:
    connection.sendall(json.dumps(message).encode() + b"\n")
