"""The core's modules import each other without a cycle, and only at module level.

The import graph is read from the source with ``ast``: one node per module of
``packages/core/src``, one edge per module-level ``import`` or ``from ... import`` of a
``dex_agents`` module (``from package import name`` counts as an import of the submodule when
``name`` is one). Imports under ``if TYPE_CHECKING:`` never run, so they are left out. A function
body that imports a ``dex_agents`` module is refused: such an import exists to dodge a cycle or to
hide a dependency; only the optional extras in :data:`ALLOWED_FUNCTION_IMPORTS` are imported late.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import dex_agents

PACKAGE_DIR = Path(dex_agents.__file__).resolve().parent
SRC_DIR = PACKAGE_DIR.parent

#: Function-level imports that are allowed, by module: documented optional dependencies only.
#: ``dex_agents.litellm`` needs the ``litellm`` extra and ``dex_agents.mcp`` the ``mcp`` extra, so
#: the core imports them only where a caller asked for them (``dex-agents demo --model``, the
#: scenario MCP server), where an ``ImportError`` or ``DemoError`` names the missing extra;
#: tracing imports its OpenTelemetry module only when enabled, and is inactive without the API.
ALLOWED_FUNCTION_IMPORTS: dict[str, frozenset[str]] = {
    "dex_agents._demo": frozenset({"dex_agents.litellm"}),
    "dex_agents.testing.scenarios._scenario_mcp_server": frozenset({"dex_agents.mcp"}),
    # A forked scenario MCP server runs the server module (the MCP SDK's server, the mcp extra).
    "dex_agents.testing.scenarios._scenario_mcp_zygote": frozenset(
        {"dex_agents.testing.scenarios._scenario_mcp_server_main"}
    ),
    # The MCP-tool factory checks a source only when an adapter wraps one (the source needs the
    # mcp extra), so an adapter imports without the MCP SDK.
    "dex_agents.adapters._mcp_tools": frozenset({"dex_agents.mcp"}),
    # The only module that imports OpenTelemetry (the otel extra), once tracing is enabled.
    "dex_agents._tracing.session_tracing": frozenset({"dex_agents._tracing.otel_spans"}),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC_DIR).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, ast.Module]:
    return {
        _module_name(path): ast.parse(path.read_text(), str(path))
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
    }


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports that run when the module is imported: top level, and inside module-level
    ``if``/``try`` blocks, but not under ``if TYPE_CHECKING:``."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _module_level_imports(node.body)
            yield from _module_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _module_level_imports(block)
            for handler in node.handlers:
                yield from _module_level_imports(handler.body)


def _imported_modules(importer: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    modules = _modules()
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    base = node.module or ""
    if node.level:
        package = importer.split(".")[: -node.level] if importer in modules else []
        base = ".".join([*package, *([base] if base else [])])
    found = {f"{base}.{alias.name}" for alias in node.names} & modules.keys()
    named = {alias.name for alias in node.names if f"{base}.{alias.name}" not in modules}
    if base in modules and named:
        found.add(base)
    return found


def _import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, tree in _modules().items():
        graph[name] = set()
        for node in _module_level_imports(tree.body):
            graph[name] |= _imported_modules(name, node)
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it, or ``None``."""
    unvisited, on_path, done = 0, 1, 2
    state = dict.fromkeys(graph, unvisited)
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = on_path
        path.append(module)
        for imported in sorted(graph[module]):
            if state[imported] == on_path:
                return [*path[path.index(imported) :], imported]
            if state[imported] == unvisited:
                cycle = visit(imported)
                if cycle is not None:
                    return cycle
        path.pop()
        state[module] = done
        return None

    for module in sorted(graph):
        if state[module] == unvisited:
            cycle = visit(module)
            if cycle is not None:
                return cycle
    return None


def test_the_graph_covers_every_module_and_sees_the_session_wiring() -> None:
    graph = _import_graph()
    assert "dex_agents._session.flow" in graph
    # The Flow module wires every Step module; a graph that missed these edges proves nothing.
    assert {
        "dex_agents._session.turn_steps",
        "dex_agents._session.model_steps",
        "dex_agents._session.tool_steps",
        "dex_agents._session.wait_steps",
        "dex_agents._session.task_steps",
        "dex_agents._session.control_steps",
    } <= graph["dex_agents._session.flow"]
    assert "dex_agents._session.flow" in graph["dex_agents"]


def test_no_import_cycle_in_the_core() -> None:
    cycle = _find_cycle(_import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_step_module_imports_another() -> None:
    step_modules = {name for name in _modules() if name.endswith("_steps")}
    graph = _import_graph()
    for module in sorted(step_modules):
        assert not graph[module] & step_modules, f"{module} imports {graph[module] & step_modules}"


def _function_imports(tree: ast.Module) -> Iterator[tuple[str, int, str]]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Import):
                for alias in inner.names:
                    yield node.name, inner.lineno, alias.name
            elif isinstance(inner, ast.ImportFrom) and (inner.module or inner.level):
                yield node.name, inner.lineno, "." * inner.level + (inner.module or "")


def test_no_function_body_imports_a_dex_agents_module() -> None:
    offenders = [
        f"{module}:{line} ({function}) imports {imported}"
        for module, tree in _modules().items()
        for function, line, imported in _function_imports(tree)
        if (imported.startswith(("dex_agents", ".")))
        and imported not in ALLOWED_FUNCTION_IMPORTS.get(module, frozenset())
    ]
    assert offenders == []


def test_every_allowed_function_import_still_exists() -> None:
    # An allowance nothing uses any more would let a new late import slip in unnoticed.
    found = {
        (module, imported)
        for module, tree in _modules().items()
        for _, _, imported in _function_imports(tree)
    }
    for module, allowed in ALLOWED_FUNCTION_IMPORTS.items():
        for imported in allowed:
            assert (module, imported) in found, f"{module} no longer imports {imported} late"


def test_the_adapter_kit_imports_first_in_a_fresh_interpreter() -> None:
    # The graph above has module-to-module edges only. The kit's error policy checks arguments
    # with the Stepwise JSON Schema validator (so importing it runs dex_agents.stepwise's
    # __init__) and the Stepwise runner uses the kit: a cycle that shows only when the kit is
    # imported before Stepwise, as every adapter package does.
    finished = subprocess.run(
        [sys.executable, "-c", "import dex_agents.adapters"], capture_output=True, text=True
    )
    assert finished.returncode == 0, finished.stderr
