"""Scenario MCP servers forked from a warm parent of their Worker instead of started afresh.

The scenario MCP server is a stdio server that the Worker's MCP client starts per connection
(each Worker, and again after a Worker is killed). Started afresh, a server spends a second or
more importing the MCP SDK before it answers. A Worker of the shared scenarios therefore forks,
before it serves (while it is the only thread of its process), a warm parent that has imported
the server: the zygote. The command the MCP client runs is a small launcher (``python -I -S``,
no site packages); it hands its stdin, stdout and stderr to the zygote over a Unix socket, and
the zygote forks a server that speaks MCP on them, a real process with the SDK's real server.
The launcher then waits until that server exits, so the MCP client sees one process whose pipes
are the server's. The socket is named for the Worker's process ID in Linux's abstract namespace,
so the launcher finds its Worker's zygote from its parent's ID alone (the MCP client passes the
server only a small safe environment). Without a zygote (the Worker could not fork one, or it is
gone) the launcher becomes ``python -m`` of the server module, as before.

The zygote and its servers are in the Worker's process group and die with the Worker (a SIGKILL
of the group, and each one's parent-death signal), so a killed Worker's call never finishes
behind the test's back. ``DEX_AGENTS_TEST_FORK_SERVER=0`` turns zygotes off with fork servers.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from typing import Final

from dex_agents.testing._fork_server import FORK_SERVER_ENV

__all__ = [
    "scenario_mcp_server_command",
    "scenario_mcp_zygote",
    "start_scenario_mcp_zygote",
]

_SOCKET_PREFIX: Final = "\0dex-agents-scenario-mcp-zygote-"
SERVER_MODULE: Final = "dex_agents.testing.scenarios._scenario_mcp_server_main"

_PR_SET_PDEATHSIG: Final = 1
_LAUNCHER: Final = f"""
import json, os, socket, sys
if sys.platform.startswith("linux"):
    try:
        zygote = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        zygote.connect({_SOCKET_PREFIX!r} + str(os.getppid()))
        socket.send_fds(zygote, [json.dumps(sys.argv[1:]).encode()], [0, 1, 2])
    except OSError:
        pass
    else:
        # The server has the pipes now: the client's close of stdin reaches it alone.
        os.close(0)
        os.close(1)
        zygote.recv(1)  # returns when the server exits (it holds the other end)
        os._exit(0)
os.execv(sys.executable, [sys.executable, "-m", {SERVER_MODULE!r}, *sys.argv[1:]])
"""


def scenario_mcp_server_command(arguments: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The stdio command and arguments that run the scenario MCP server with ``arguments``:
    forked by the zygote of the Worker that runs them, else ``python -m`` of the server module."""
    return sys.executable, ("-I", "-S", "-c", _LAUNCHER, *arguments)


@contextlib.contextmanager
def scenario_mcp_zygote() -> Iterator[int | None]:
    """A zygote of this process for the block only (``start_scenario_mcp_zygote``), killed and
    reaped when it ends: for a warm parent that Workers fork from, whose preload lists the
    scenario MCP server (a fork instead of a fresh server), and whose children must not inherit
    a zygote. It also leaves the server imported here, so the Workers' zygotes start warm.

    Example:
        >>> with scenario_mcp_zygote() as zygote_pid:  # None here: pytest has threads
        ...     pass
    """
    pid = start_scenario_mcp_zygote()
    try:
        yield pid
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def start_scenario_mcp_zygote() -> int | None:
    """Fork this process's zygote, which forks the scenario MCP servers this process starts.

    Call it in a Worker before it serves: it forks only while this process has one thread.

    Returns:
        The zygote's process ID, or ``None`` when zygotes are off, the mcp extra is missing, or
        this process has threads (its MCP servers then start as ``python -m``).

    Example:
        >>> zygote_pid = start_scenario_mcp_zygote()  # a Worker, before run_agent_worker  # doctest: +SKIP
    """
    if os.environ.get(FORK_SERVER_ENV, "1") == "0" or not sys.platform.startswith("linux"):
        return None
    try:
        # The warm part: imported here, once, unless the fork server's preload already did.
        __import__(SERVER_MODULE)
    except ImportError:
        return None
    if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) > 1:
        return None
    worker_pid = os.getpid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(f"{_SOCKET_PREFIX}{worker_pid}")
    except OSError:
        listener.close()
        return None
    listener.listen(16)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            _serve_forks(listener, worker_pid=worker_pid)
        finally:
            os._exit(1)
    listener.close()
    return pid


def _die_with_parent(parent_pid: int) -> None:
    import ctypes

    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent_pid:
        os._exit(1)


def _serve_forks(listener: socket.socket, *, worker_pid: int) -> None:
    """The zygote: fork a server per launcher until the Worker dies."""
    _die_with_parent(worker_pid)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # its servers are reaped as they exit
    zygote_pid = os.getpid()
    while True:
        launcher, _ = listener.accept()
        try:
            message, fds, _flags, _address = socket.recv_fds(launcher, 65536, 3)
        except OSError:
            launcher.close()
            continue
        if len(fds) == 3:
            pid = os.fork()
            if pid == 0:
                listener.close()
                _run_server(launcher, fds, json.loads(message), zygote_pid=zygote_pid)
        for fd in fds:
            os.close(fd)
        launcher.close()


def _run_server(
    launcher: socket.socket, fds: list[int], arguments: list[str], *, zygote_pid: int
) -> None:
    """A forked server: the launcher's pipes become its own, then it serves MCP on them."""
    status = 1
    try:
        _die_with_parent(zygote_pid)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)

        def launcher_gone() -> bool:
            # The launcher sends nothing more: its end turns readable (EOF) once it has died.
            return bool(select.select([launcher], [], [], 0)[0])

        from dex_agents.testing.scenarios._scenario_mcp_server_main import main

        main(arguments, worker_gone=launcher_gone)
        status = 0
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(status)
