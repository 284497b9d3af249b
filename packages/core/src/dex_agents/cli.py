"""The ``dex-agents`` command line: ``dex-agents demo``, ``worker`` and ``doctor``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from dex_agents._demo import (
    DEFAULT_DEMO_DIRECTORY,
    LITELLM_API_ENV,
    ApprovalMode,
    DemoError,
    DemoModelApi,
    DemoOptions,
    run_demo,
)
from dex_agents._doctor import run_doctor
from dex_agents._worker_command import (
    DEFAULT_WORKER_ADDRESS,
    SERVER_ADDRESS_ENV,
    WorkerExitStatus,
    WorkerImportError,
    WorkerOptions,
    run_worker,
)
from dex_agents.exceptions import ConfigurationError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dex-agents", description="Durable AI agent sessions on the Dex workflow engine."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="run a support agent (a scripted model, or --model) on the embedded engine",
        description=(
            "Start the embedded engine on a database in --directory, a Worker, and a support "
            "agent with a scripted model (no API key), and stream one turn: an order lookup "
            "and a refund that needs your approval. Kill it at any time and reattach with "
            "--session."
        ),
    )
    demo.add_argument(
        "--session",
        metavar="ID",
        help="reattach to this session; with --message, send it the next message",
    )
    decision = demo.add_mutually_exclusive_group()
    decision.add_argument(
        "--approve", action="store_true", help="approve pending tool calls without asking"
    )
    decision.add_argument(
        "--reject", action="store_true", help="reject pending tool calls without asking"
    )
    demo.add_argument(
        "--directory",
        type=Path,
        default=None,
        help="where the engine database and logs live (default: ./.dex-agents)",
    )
    demo.add_argument(
        "--message",
        help="the first user message of a new session, or with --session the next one",
    )
    demo.add_argument(
        "--model",
        metavar="LITELLM_MODEL",
        help=(
            "run the agent on a real model through LiteLLM, such as openai/gpt-5-mini, with the "
            'API key from the environment (needs pip install "dex-agents[litellm]"); '
            "default: the scripted model, no key"
        ),
    )
    demo.add_argument(
        "--api-base",
        metavar="URL",
        help=(
            "the provider endpoint for --model, such as a proxy or an OpenAI-compatible server "
            "(vLLM, Ollama, llama.cpp, LM Studio); implies --api chat_completions"
        ),
    )
    demo.add_argument(
        "--api",
        choices=[api.value for api in DemoModelApi],
        default=None,
        help=(
            "the provider API --model calls (default: $"
            f"{LITELLM_API_ENV}, else chat_completions with --api-base and responses for "
            "OpenAI models without it)"
        ),
    )
    demo.add_argument(
        "--verbose",
        action="store_true",
        help="log at DEBUG, with the tracebacks of failed Step attempts",
    )
    _add_worker_parser(commands)
    commands.add_parser(
        "doctor",
        help="report the installed dex-agents packages and whether they are on one version line",
        description=(
            "List the installed dex-agents packages (dex-agents, dex-local-engine, every "
            "dex-agents-*), their versions, and each requirement (an adapter's framework, the "
            "Dex SDK) against the range it was tested with. Exits 1 when a package is off the "
            "line of dex-agents, a pin differs, or a requirement is missing or out of range."
        ),
    )
    return parser


_WORKER_EXIT_STATUSES = """exit statuses:
  0  stopped by SIGTERM or SIGINT (running Steps had --drain-timeout to finish)
  1  the Worker stopped by itself with an error after it was ready
  2  a wrong command line
  3  an import path names no Flows (missing module or attribute, an import error, or not a
     Flow, a list of Flows, or a factory of them)
  4  the Worker could not reach the engine or register with it
"""


def _add_worker_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser(
        "worker",
        help="serve an application's Flows with a Worker process (module:attribute ...)",
        description=(
            "Serve the Flows that the import paths name with one pull Worker. Each path is "
            "module:attribute and names a Flow, a list of Flows, or a factory (a callable "
            "without arguments returning either); the current directory is importable. Prints "
            "one line once registered; SIGTERM or SIGINT stops it gracefully."
        ),
        epilog=_WORKER_EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    worker.add_argument("import_paths", nargs="+", metavar="MODULE:ATTRIBUTE")
    worker.add_argument(
        "--address",
        help=f"the engine, host:port (default: ${SERVER_ADDRESS_ENV} or {DEFAULT_WORKER_ADDRESS})",
    )
    worker.add_argument(
        "--task-slots",
        type=int,
        default=8,
        help="tasks run at once, one kept for RPCs: N-1 Steps (default: 8); more wait in the engine",
    )
    worker.add_argument(
        "--blob-cache",
        type=Path,
        help="the blob cache directory (default: a temporary one, removed at exit)",
    )
    worker.add_argument(
        "--blob-cache-mib", type=int, default=64, help="the blob cache's size (default: 64)"
    )
    worker.add_argument(
        "--drain-timeout",
        type=float,
        default=30.0,
        help="seconds running Steps get to finish after SIGTERM/SIGINT (default: 30)",
    )
    worker.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="the log level of its stderr (default: INFO)",
    )


def _run_worker_command(arguments: argparse.Namespace) -> int:
    if arguments.task_slots < 1 or arguments.blob_cache_mib < 1 or arguments.drain_timeout < 0:
        print(
            "dex-agents worker: --task-slots and --blob-cache-mib must be at least 1 and "
            "--drain-timeout not negative",
            file=sys.stderr,
        )
        return WorkerExitStatus.USAGE
    logging.basicConfig(
        level=arguments.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    options = WorkerOptions(
        import_paths=tuple(arguments.import_paths),
        server_address=(
            arguments.address or os.environ.get(SERVER_ADDRESS_ENV) or DEFAULT_WORKER_ADDRESS
        ),
        task_slots=arguments.task_slots,
        blob_cache=arguments.blob_cache,
        blob_cache_bytes=arguments.blob_cache_mib * 1024 * 1024,
        drain_timeout=timedelta(seconds=arguments.drain_timeout),
    )
    try:
        return asyncio.run(run_worker(options))
    except WorkerImportError as failure:
        print(f"dex-agents worker: {failure}", file=sys.stderr)
        return WorkerExitStatus.BAD_IMPORT_PATH
    except KeyboardInterrupt:  # before the signal handlers were installed
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dex-agents``; returns the exit status.

    Example::

        dex-agents demo
        dex-agents demo --session demo-1a2b3c4d --approve
        dex-agents demo --model openai/gpt-5-mini
        dex-agents worker myapp.agents:flows --address 127.0.0.1:8801
        dex-agents doctor
    """
    arguments = _parser().parse_args(argv)
    if arguments.command == "doctor":
        return run_doctor()
    if arguments.command == "worker":
        return _run_worker_command(arguments)
    if arguments.api_base and not arguments.model:
        print("dex-agents demo: --api-base needs --model", file=sys.stderr)
        return 2
    try:
        api = _demo_api(arguments.api, arguments.api_base)
    except ValueError as problem:
        print(f"dex-agents demo: {problem}", file=sys.stderr)
        return 2
    if api is not None and not arguments.model:
        print("dex-agents demo: --api needs --model", file=sys.stderr)
        return 2
    if arguments.message is not None and not arguments.message.strip():
        print("dex-agents demo: --message is blank", file=sys.stderr)
        return 2
    _configure_logging(verbose=arguments.verbose)
    approval = (
        ApprovalMode.APPROVE
        if arguments.approve
        else ApprovalMode.REJECT
        if arguments.reject
        else ApprovalMode.ASK
    )
    options = DemoOptions(
        session_id=arguments.session,
        approval=approval,
        directory=arguments.directory or DEFAULT_DEMO_DIRECTORY,
        message=arguments.message,
        model=arguments.model,
        api_base=arguments.api_base,
        api=api,
    )
    try:
        return asyncio.run(run_demo(options))
    except DemoError as failure:
        print(f"dex-agents demo: {failure}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _demo_api(option: str | None, api_base: str | None) -> DemoModelApi | None:
    """``--api``, else ``$DEX_AGENTS_LITELLM_API``, else Chat Completions with ``--api-base``.

    Raises:
        ValueError: The environment variable names no API.
    """
    chosen = option or os.environ.get(LITELLM_API_ENV, "").strip() or None
    if chosen is None:
        return DemoModelApi.CHAT_COMPLETIONS if api_base else None
    try:
        return DemoModelApi(chosen)
    except ValueError:
        allowed = " or ".join(api.value for api in DemoModelApi)
        raise ConfigurationError(
            f"{LITELLM_API_ENV}={chosen!r} is not an API; use {allowed}"
        ) from None


def _configure_logging(*, verbose: bool) -> None:
    """One line per record on stderr: WARNING and above, or everything of dex-agents and the
    SDK with ``--verbose`` (the tracebacks of failed Step attempts are DEBUG)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if verbose:
        for name in ("dex_agents", "dex"):
            logging.getLogger(name).setLevel(logging.DEBUG)


if __name__ == "__main__":
    sys.exit(main())
