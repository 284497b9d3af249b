"""The ``dex-agents`` command line: ``dex-agents demo`` and ``dex-agents doctor``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from dex_agents._demo import (
    DEFAULT_DEMO_DIRECTORY,
    DEFAULT_DEMO_MESSAGE,
    ApprovalMode,
    DemoError,
    DemoOptions,
    run_demo,
)
from dex_agents._doctor import run_doctor

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
    demo.add_argument("--session", metavar="ID", help="reattach to this session")
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
    demo.add_argument("--message", help="the first user message of a new session")
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
        "--api-base", metavar="URL", help="the provider endpoint for --model, such as a proxy"
    )
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dex-agents``; returns the exit status.

    Example::

        dex-agents demo
        dex-agents demo --session demo-1a2b3c4d --approve
        dex-agents demo --model openai/gpt-5-mini
        dex-agents doctor
    """
    arguments = _parser().parse_args(argv)
    if arguments.command == "doctor":
        return run_doctor()
    if arguments.api_base and not arguments.model:
        print("dex-agents demo: --api-base needs --model", file=sys.stderr)
        return 2
    if arguments.session and arguments.message:
        print(
            "dex-agents demo: --message starts a new session; drop it or --session", file=sys.stderr
        )
        return 2
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
        message=arguments.message or DEFAULT_DEMO_MESSAGE,
        model=arguments.model,
        api_base=arguments.api_base,
    )
    try:
        return asyncio.run(run_demo(options))
    except DemoError as failure:
        print(f"dex-agents demo: {failure}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
