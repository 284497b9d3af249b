"""``python -m release_train``: the release check and the workspace queries the CI scripts use."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from release_train._compatibility import compatibility_table
from release_train._errors import ReleaseTrainError
from release_train._release_check import ReleaseCheckOptions, run_release_check
from release_train._workspace import REPOSITORY_ROOT, workspace_members


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m release_train", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "check", help="build every package and check each wheel alone in a fresh venv"
    )
    check.add_argument(
        "--python",
        # The interpreter behind this venv, so the venvs are made from the same CPython.
        default=getattr(sys, "_base_executable", sys.executable),
        help="the interpreter the venvs are made from (default: the workspace's)",
    )
    check.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PACKAGE",
        help="check only this package in a fresh venv (repeatable; every package is still built)",
    )
    check.add_argument(
        "--work-directory",
        type=Path,
        help="keep the venvs and logs here (default: a temporary directory, removed on success)",
    )
    commands.add_parser("members", help="print the workspace members' directories")
    runners = commands.add_parser(
        "scenario-runners", help="print the scenario runners a member registers, comma-separated"
    )
    runners.add_argument("directory", type=Path)
    commands.add_parser("compatibility-table", help="print the root README's compatibility table")
    return parser


def _scenario_runners(directory: Path) -> str:
    target = directory.resolve()
    for member in workspace_members():
        if member.directory == target:
            return ",".join(member.scenario_runners)
    raise ReleaseTrainError(f"{directory} is not a workspace member")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status."""
    arguments = _parser().parse_args(argv)
    try:
        if arguments.command == "check":
            options = ReleaseCheckOptions(
                python=arguments.python,
                only=tuple(arguments.only),
                work_directory=arguments.work_directory,
            )
            return run_release_check(options)
        if arguments.command == "members":
            print("\n".join(str(member.relative) for member in workspace_members()))
        elif arguments.command == "scenario-runners":
            print(_scenario_runners(arguments.directory))
        else:
            print(compatibility_table(workspace_members(REPOSITORY_ROOT)), end="")
    except ReleaseTrainError as error:
        print(f"release_train: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
