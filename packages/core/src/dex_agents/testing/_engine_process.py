"""Start and stop a private Dex engine: the embedded local engine, or ``dexcli dev``."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from dex_agents.exceptions import DexAgentsError
from dex_agents.testing._child_process import ChildProcess, start_child, tail, terminate
from dex_agents.testing._fork_server import fork_child

DEXCLI_ENV = "DEXCLI"
"""Names the ``dexcli`` binary; when set, tests run against ``dexcli dev --engine zd``."""

DEX_SERVER_ZD_BINARY_ENV = "DEX_SERVER_ZD_BINARY"
"""Names the ``dex-server-zd`` binary when it is not next to ``dexcli``."""

DEFAULT_ENGINE_STARTUP_TIMEOUT_SECONDS = 60.0

_READY_LINE = re.compile(r"^dex-local-engine ready on (\S+)\s*$", re.MULTILINE)
_POLL_INTERVAL_SECONDS = 0.02
_STOP_TIMEOUT_SECONDS = 10.0
_LOCAL_ENGINE_MODULE = "dex_local_engine.cli"

# Skips fsync but survives a process kill; a file also works with dexcli releases
# that predate --durability.
_PROCESS_CRASH_SAFE_ZD_CONFIG = "dev:\n  durabilityMode: processCrashSafe\n"


class EngineDurability(StrEnum):
    """How the embedded engine makes commits durable (its ``--durability`` flag)."""

    FSYNC = "fsync"
    PROCESS_CRASH_SAFE = "process-crash-safe"


class EngineStartError(DexAgentsError, RuntimeError):
    """The engine process could not be started or did not become ready."""


@dataclass(frozen=True)
class EngineLogs:
    """Where an engine process writes its output.

    Attributes:
        stdout: The engine's standard output (the ready line).
        stderr: The engine's diagnostics.
    """

    stdout: Path
    stderr: Path

    @classmethod
    def in_directory(cls, directory: Path, prefix: str = "engine") -> EngineLogs:
        """Log files ``<prefix>.stdout.log`` and ``<prefix>.stderr.log`` in ``directory``."""
        return cls(directory / f"{prefix}.stdout.log", directory / f"{prefix}.stderr.log")


def local_engine_command() -> list[str]:
    """The command that runs ``dex-local-engine`` in this Python environment.

    Prefers the console script next to ``sys.executable``, so the engine comes
    from the same environment as the caller.
    """
    script = Path(sys.executable).with_name("dex-local-engine")
    if script.exists():
        return [str(script)]
    return [
        sys.executable,
        "-c",
        "import sys; from dex_local_engine.cli import main; sys.exit(main())",
    ]


class EngineProcess:
    """A running Dex engine process and the address it serves on.

    Start one with ``EngineProcess.start_local`` (the embedded engine on a
    database file) or ``EngineProcess.start_dexcli`` (a real Dex through
    ``dexcli dev --engine zd``). The process dies with its parent on Linux.

    Example:
        >>> import asyncio
        >>> logs = EngineLogs.in_directory(tmp_path)
        >>> engine = asyncio.run(EngineProcess.start_local(tmp_path / "engine.db", logs))
        >>> engine.server_address.startswith("127.0.0.1:")
        True
        >>> asyncio.run(engine.stop())
    """

    def __init__(self, process: ChildProcess, server_address: str, logs: EngineLogs) -> None:
        self.process = process
        self.server_address = server_address
        self.logs = logs

    @classmethod
    async def start_local(
        cls,
        database_path: Path,
        logs: EngineLogs,
        *,
        durability: EngineDurability | None = None,
        address: str = "127.0.0.1:0",
        timeout: float = DEFAULT_ENGINE_STARTUP_TIMEOUT_SECONDS,
        stream_store_disabled: bool = False,
        warm_start: bool = False,
    ) -> EngineProcess:
        """Start ``dex-local-engine serve`` and wait for its ready line.

        ``stream_store_disabled`` runs it with ``--stream-store disabled``, like a Dex Server
        whose ``streamStore.backend`` is ``disabled``: Step Stream writes (a session's
        ``AgentEvents``) are dropped, and Client Stream reads answer ``FAILED_PRECONDITION``.
        ``warm_start=True`` forks it from a warm parent that this process keeps for its later
        engines (a test harness starts many; the parent's log directory, ``fork-server-<hash>``,
        is left beside ``logs``' directory); the default runs the console script, as a product
        (the demo, ``LocalRuntime``, a benchmark measuring the engine) must.

        Raises:
            EngineStartError: The engine exited or printed no ready line within
                ``timeout``; the message carries its stderr.
        """
        database_path.parent.mkdir(parents=True, exist_ok=True)
        arguments = [
            "serve",
            "--address",
            address,
            "--database",
            str(database_path),
        ]
        if durability is not None:
            arguments += ["--durability", durability.value]
        if stream_store_disabled:
            arguments += ["--stream-store", "disabled"]
        logs.stdout.unlink(missing_ok=True)
        process = _start_local_engine(arguments, logs, warm_start=warm_start)
        deadline = time.monotonic() + timeout
        while True:
            ready = _READY_LINE.search(_read(logs.stdout))
            if ready is not None:
                return cls(process, ready.group(1), logs)
            _raise_if_exited(process, logs, "dex-local-engine")
            if time.monotonic() >= deadline:
                terminate(process, _STOP_TIMEOUT_SECONDS)
                raise EngineStartError(
                    f"dex-local-engine printed no ready line within {timeout:g} s; "
                    f"its stderr: {tail(logs.stderr) or '(empty)'}"
                )
            await asyncio.sleep(_POLL_INTERVAL_SECONDS)

    @classmethod
    def start_dexcli(
        cls,
        dexcli: str,
        state_dir: Path,
        logs: EngineLogs,
        *,
        server_zd_config: Path | None = None,
    ) -> EngineProcess:
        """Start ``dexcli dev --engine zd`` on free ports with a processCrashSafe config.

        The engine is ready once it answers a health check; ``AgentTestStack``
        waits for that. ``server_zd_config`` replaces the generated config file,
        so it must set ``dev.durabilityMode`` itself. ``dex-server-zd`` is found
        next to ``dexcli`` unless ``DEX_SERVER_ZD_BINARY`` names it.

        Raises:
            EngineStartError: ``dexcli`` or ``dex-server-zd`` cannot be found.
        """
        dexcli_path = shutil.which(dexcli) or dexcli
        if not Path(dexcli_path).exists():
            raise EngineStartError(f"{DEXCLI_ENV}={dexcli} does not name an existing dexcli binary")
        env = dict(os.environ)
        if DEX_SERVER_ZD_BINARY_ENV not in env:
            server_zd = Path(dexcli_path).with_name("dex-server-zd")
            if not server_zd.exists():
                raise EngineStartError(
                    f"dex-server-zd is not next to {dexcli_path}; "
                    f"set {DEX_SERVER_ZD_BINARY_ENV} to its path"
                )
            env[DEX_SERVER_ZD_BINARY_ENV] = str(server_zd)
        state_dir.mkdir(parents=True, exist_ok=True)
        if server_zd_config is None:
            server_zd_config = state_dir / "server-zd.yaml"
            server_zd_config.write_text(_PROCESS_CRASH_SAFE_ZD_CONFIG)
        dex_port, web_port = _free_port(), _free_port()
        command = [
            dexcli_path,
            "dev",
            "--engine",
            "zd",
            "-zd-config",
            str(server_zd_config),
            "--bind-address",
            "127.0.0.1",
            "--dex-port",
            str(dex_port),
            "--web-port",
            str(web_port),
            "--open=false",
            "--sqlite-db-filename",
            str(state_dir / "dex.sqlite.db"),
            "--blob-store-dir",
            str(state_dir / "dex.blobs"),
            "--server-log-folder",
            str(state_dir / "server-logs"),
        ]
        return cls(_start(command, logs, env), f"127.0.0.1:{dex_port}", logs)

    def check_running(self) -> None:
        """Raise when the engine process has exited.

        Raises:
            EngineStartError: The engine exited; the message carries its stderr.
        """
        _raise_if_exited(self.process, self.logs, "the engine")

    async def stop(self, timeout: float = _STOP_TIMEOUT_SECONDS) -> None:
        """Stop the engine with SIGTERM, or SIGKILL after ``timeout`` seconds."""
        await asyncio.to_thread(terminate, self.process, timeout)


def _start(
    command: list[str],
    logs: EngineLogs,
    env: dict[str, str] | None = None,
    *,
    own_process_group: bool = False,
) -> subprocess.Popen[bytes]:
    try:
        return start_child(
            command,
            stdout_path=logs.stdout,
            stderr_path=logs.stderr,
            env=env,
            own_process_group=own_process_group,
        )
    except OSError as failure:
        raise EngineStartError(f"cannot start {command[0]}: {failure}") from failure


def _start_local_engine(
    arguments: list[str], logs: EngineLogs, *, warm_start: bool
) -> ChildProcess:
    # With warm_start, forked from a warm parent that has imported the engine (a fork server of
    # dex_agents.testing, shared by every engine this process starts), which skips a fresh
    # interpreter's imports (about half a second on a loaded machine); else the console script.
    # Either way in its own process group: Ctrl+C in a terminal reaches this process only, which
    # stops its Workers first and the engine last, instead of an engine gone under running
    # Workers.
    if warm_start:
        forked = fork_child(
            _LOCAL_ENGINE_MODULE,
            preload_env={},
            cwd=None,
            env=dict(os.environ),
            stdout_path=logs.stdout,
            stderr_path=logs.stderr,
            argv=arguments,
        )
        if forked is not None:
            return forked
    return _start([*local_engine_command(), *arguments], logs, own_process_group=True)


def _raise_if_exited(process: ChildProcess, logs: EngineLogs, what: str) -> None:
    status = process.poll()
    if status is not None:
        raise EngineStartError(
            f"{what} exited with status {status}; its stderr: {tail(logs.stderr) or '(empty)'}"
        )


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
