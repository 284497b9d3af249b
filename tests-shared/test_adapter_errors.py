"""Adapters raise from ``dex_agents.exceptions``: no bare built-in error, every error class a
``DexAgentsError``.

The core and the engine have their own checks (``test_core_errors.py``, the engine's tests); this
one reads the source of every adapter package in the workspace, so a new adapter is covered too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGES_DIR = Path(__file__).resolve().parent.parent / "packages"
#: Built-in errors an adapter must not raise bare: each has a ``dex_agents.exceptions`` class
#: that keeps it as a base (ConfigurationError, ConfigurationTypeError, StoredStateError,
#: AgentFrameworkError, ToolTaskPollerMissingError, RunnerContractError).
BARE_ERRORS = frozenset(
    {
        "Exception",
        "ValueError",
        "TypeError",
        "LookupError",
        "KeyError",
        "IndexError",
        "RuntimeError",
    }
)
ADAPTER_SOURCES = sorted(
    path
    for path in PACKAGES_DIR.glob("*/src/dex_agents_*/**/*.py")
    if not path.is_relative_to(PACKAGES_DIR / "core")
)


def _raised_name(node: ast.Raise) -> str | None:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return exc.id if isinstance(exc, ast.Name) else None


def test_the_adapters_are_found() -> None:
    packages = {path.relative_to(PACKAGES_DIR).parts[0] for path in ADAPTER_SOURCES}
    assert {
        "openai-agents",
        "pydantic-ai",
        "langgraph",
        "google-adk",
        "claude-agent-sdk",
        "strands",
    } <= (packages)


@pytest.mark.parametrize(
    "path", ADAPTER_SOURCES, ids=lambda path: str(path.relative_to(PACKAGES_DIR))
)
def test_an_adapter_module_raises_no_bare_built_in_error(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    offenders = [
        f"line {node.lineno}: {_raised_name(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Raise) and _raised_name(node) in BARE_ERRORS
    ]
    assert offenders == []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
            bases = {base.id for base in node.bases if isinstance(base, ast.Name)}
            assert not bases & BARE_ERRORS or len(bases) > 1, (
                f"{node.name} derives only from a built-in error; add a dex_agents.exceptions base"
            )
