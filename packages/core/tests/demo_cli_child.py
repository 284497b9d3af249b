"""``dex-agents`` run in a child forked from a warm parent that has imported it (and LiteLLM).

``python -m dex_agents.cli demo`` spends most of a second importing dex-agents, and with
``--model`` seconds importing LiteLLM, before it does anything; a test that runs the demo
several times pays that once per test process here. The child is a real process that runs the
CLI's ``main`` as ``python -m dex_agents.cli`` would: its own process group, environment, working
directory and exit status, its output in files, stdin at its end (``/dev/null``). Without fork
servers (``DEX_AGENTS_TEST_FORK_SERVER=0``) ``run_demo_cli`` runs ``python -m dex_agents.cli``
itself and ``fork_demo_cli`` returns ``None``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import litellm_test_support  # noqa: F401  (LiteLLM offline before anything imports it)
from dex_agents import cli
from dex_agents.testing._fork_server import ForkedProcess, fork_child

_TESTS_DIR = Path(__file__).resolve().parent
_PRELOAD_LITELLM_ENV = "DEMO_CLI_PRELOAD_LITELLM"
# A fork server's children start in its own directory (where this module imports from).
_WORKING_DIRECTORY_ENV = "DEMO_CLI_WORKING_DIRECTORY"


def preload_worker() -> None:
    """Import what ``dex-agents demo`` imports, once, in the parent the runs fork from; LiteLLM
    too for ``--model`` runs."""
    import dex_agents._demo

    if os.environ.get(_PRELOAD_LITELLM_ENV) == "1":
        import dex_agents.litellm

    dex_agents._demo.build_demo_flow()


def fork_demo_cli(
    arguments: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    output_path: Path,
    litellm: bool = False,
) -> ForkedProcess | None:
    """Start ``dex-agents <arguments>`` in ``cwd``, its stdout and stderr both in ``output_path``;
    ``None`` when fork servers are off or failed (the caller runs ``python -m`` then)."""
    return fork_child(
        "demo_cli_child",
        preload_env={_PRELOAD_LITELLM_ENV: "1" if litellm else "0"},
        cwd=_TESTS_DIR,
        env={**env, _WORKING_DIRECTORY_ENV: str(cwd)},
        stdout_path=output_path,
        stderr_path=output_path,
        argv=arguments,
    )


def run_demo_cli(
    arguments: Sequence[str], *, env: Mapping[str, str], output_dir: Path, timeout: float
) -> tuple[subprocess.CompletedProcess[str], bool]:
    """Run ``dex-agents <arguments>`` (a ``--model`` demo) with ``env`` until it exits; its
    output, and whether it was forked (``False``: it ran as ``python -m``).

    Raises:
        subprocess.TimeoutExpired: It still ran after ``timeout`` seconds (it is killed).
    """
    output_dir.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = output_dir / "stdout.log", output_dir / "stderr.log"
    command = [sys.executable, "-m", "dex_agents.cli", *arguments]
    forked = fork_child(
        "demo_cli_child",
        preload_env={_PRELOAD_LITELLM_ENV: "1"},
        cwd=_TESTS_DIR,
        env=env,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        argv=arguments,
    )
    if forked is None:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        return result, False
    returncode = _wait(forked, timeout)
    stdout = stdout_path.read_text(encoding="utf-8")
    stderr = stderr_path.read_text(encoding="utf-8")
    return subprocess.CompletedProcess(command, returncode, stdout, stderr), True


def _wait(process: ForkedProcess, timeout: float) -> int:
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(30)
        raise


if __name__ == "__main__":
    os.chdir(os.environ.pop(_WORKING_DIRECTORY_ENV, os.getcwd()))
    sys.exit(cli.main())
