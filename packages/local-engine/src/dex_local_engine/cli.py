"""``dex-local-engine`` command line: ``serve``, ``history`` and ``reset``."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from dex_local_engine.engine import DEFAULT_WORKER_ADDRESS
from dex_local_engine.event_loop import choose_event_loop, run_on_event_loop
from dex_local_engine.flow_runs import DEFAULT_CLOSED_RUN_CACHE
from dex_local_engine.server import AddressInUseError, ServerConfig, serve
from dex_local_engine.step_dispatch_order import DEFAULT_MAX_OVERTAKE_SECONDS
from dex_local_engine.store import Durability, StoreError
from dex_local_engine.streams import StreamStoreBackend

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dex-local-engine",
        description="A local server that speaks the Dex gRPC wire protocol.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser("serve", help="serve until SIGTERM/SIGINT")
    serve_parser.add_argument("--address", required=True, help="HOST:PORT (port 0: any free port)")
    serve_parser.add_argument("--database", required=True, type=Path, help="SQLite file")
    serve_parser.add_argument(
        "--durability",
        choices=[d.value for d in Durability],
        default=Durability.PROCESS_CRASH_SAFE.value,
        help="fsync: survive OS crashes; process-crash-safe (default): survive engine kills",
    )
    serve_parser.add_argument(
        "--default-worker-address",
        default=DEFAULT_WORKER_ADDRESS,
        help="HOST:PORT of the listening Worker for Flows started without a worker target"
        f" (default {DEFAULT_WORKER_ADDRESS}, the SDK's default Worker listener)",
    )
    serve_parser.add_argument(
        "--closed-run-cache",
        type=_non_negative,
        default=DEFAULT_CLOSED_RUN_CACHE,
        metavar="N",
        help="closed Flow runs kept in memory after they closed or were read; older ones are "
        f"read from the database on demand (default {DEFAULT_CLOSED_RUN_CACHE}; 0: none)",
    )
    serve_parser.add_argument(
        "--stream-store",
        choices=[backend.value for backend in StreamStoreBackend],
        default=StreamStoreBackend.MEMORY.value,
        help="memory (default): keep Stream messages in engine memory; disabled: keep none, "
        "like Dex's streamStore.backend: disabled (Step Stream writes are dropped, Client "
        "Stream calls answer FAILED_PRECONDITION)",
    )
    serve_parser.add_argument(
        "--max-overtake-seconds",
        type=_non_negative_seconds,
        default=DEFAULT_MAX_OVERTAKE_SECONDS,
        metavar="S",
        help="Steps waiting for a free Worker slot are served resumed work first (a session "
        "resumed mid-turn by a person), then oldest work first, but never before a Step that "
        f"started waiting more than S seconds earlier (default {DEFAULT_MAX_OVERTAKE_SECONDS:g};"
        " 0: in arrival order)",
    )
    history_parser = commands.add_parser(
        "history", help="print every event of a Flow's history as JSON lines"
    )
    history_parser.add_argument("--address", required=True, help="HOST:PORT of a Dex server")
    history_parser.add_argument(
        "--steps-only",
        action="store_true",
        help="print only Step method events (completed or failed), one line per Step method",
    )
    history_parser.add_argument("flow_id")
    reset_parser = commands.add_parser(
        "reset", help="time travel: start a new run of a Flow from a point in its history"
    )
    reset_parser.add_argument("--address", required=True, help="HOST:PORT of a Dex server")
    point = reset_parser.add_mutually_exclusive_group()
    point.add_argument("--beginning", action="store_true", help="from the start Step (the default)")
    point.add_argument("--to-time", default="", help="keep the events before this RFC 3339 time")
    point.add_argument(
        "--to-step-type", default="", help="before the first Step method of this type started"
    )
    point.add_argument(
        "--to-step-execution", default="", help="before this Step execution's --method started"
    )
    reset_parser.add_argument("--method", choices=("wait_for", "execute"), default="")
    reset_parser.add_argument("--reason", default="", help="recorded with the reset")
    reset_parser.add_argument(
        "--skip-writes-reapply",
        action="store_true",
        help="drop the RPC and Channel writes after the reset point instead of applying them again",
    )
    reset_parser.add_argument("flow_id")
    return parser


def _non_negative(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number of 0 or more, got {text!r}")
    return number


def _non_negative_seconds(text: str) -> float:
    try:
        number = float(text)
    except ValueError:
        number = -1.0
    if not number >= 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds, 0 or more, got {text!r}")
    return number


def _address_problem(address: str) -> str | None:
    host, separator, port = address.rpartition(":")
    if not separator or not host:
        return "must be HOST:PORT, e.g. 127.0.0.1:0"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        return f"port must be a number from 0 to 65535, got {port!r}"
    return None


def _run_serve(arguments: argparse.Namespace) -> int:
    address: str = arguments.address
    worker_address: str = arguments.default_worker_address
    for option, value in (("--address", address), ("--default-worker-address", worker_address)):
        problem = _address_problem(value)
        if problem is not None:
            print(f"dex-local-engine: {option} {value!r}: {problem}", file=sys.stderr)
            return 1
    try:
        _, loop_factory = choose_event_loop()
    except ValueError as problem:
        print(f"dex-local-engine: {problem}", file=sys.stderr)
        return 1
    config = ServerConfig(
        address,
        arguments.database,
        Durability(arguments.durability),
        worker_address,
        arguments.closed_run_cache,
        StreamStoreBackend(arguments.stream_store),
        arguments.max_overtake_seconds,
    )
    try:
        run_on_event_loop(serve(config), loop_factory)
    except (StoreError, AddressInUseError) as error:
        print(f"dex-local-engine: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


def _run_reset(arguments: argparse.Namespace) -> int:
    reset_cli = importlib.import_module("dex_local_engine.reset_cli")
    point = reset_cli.ResetPoint(
        time=arguments.to_time,
        step_type=arguments.to_step_type,
        step_execution_id=arguments.to_step_execution,
        method=arguments.method,
    )
    return int(
        reset_cli.run_reset(
            arguments.address,
            arguments.flow_id,
            point,
            reason=arguments.reason,
            skip_writes_reapply=arguments.skip_writes_reapply,
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Example::

        dex-local-engine serve --address 127.0.0.1:0 --database engine.db
    """
    arguments = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if arguments.command == "serve":
        return _run_serve(arguments)
    if arguments.command == "reset":
        return _run_reset(arguments)
    history_cli = importlib.import_module("dex_local_engine.history_cli")
    return int(
        history_cli.run_history(
            arguments.address, arguments.flow_id, steps_only=arguments.steps_only
        )
    )


if __name__ == "__main__":
    sys.exit(main())
