"""Every error class of the engine is a ``DexLocalEngineError``, and the engine raises no bare
built-in error, so a caller catches anything the engine raised on purpose with one ``except``."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
from pathlib import Path

import dex_local_engine
import pytest
from dex_local_engine import DexLocalEngineError

PACKAGE_DIR = Path(dex_local_engine.__file__).resolve().parent

#: Each error class of the engine and the built-in base a caller may already catch.
ERROR_BASES: dict[str, type[BaseException]] = {
    "dex_local_engine.exceptions.DexLocalEngineError": Exception,
    "dex_local_engine.exceptions.EngineConfigurationError": ValueError,
    "dex_local_engine.errors.EngineError": Exception,
    "dex_local_engine.store.StoreError": Exception,
    "dex_local_engine.server.AddressInUseError": Exception,
    "dex_local_engine.dispatch.TaskNotStarted": Exception,
    "dex_local_engine.dispatch.UnknownTaskName": Exception,
    "dex_local_engine.dispatch.WorkerLost": Exception,
}


def _modules() -> dict[str, ast.Module]:
    modules = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = ast.parse(path.read_text(), str(path))
    return modules


def _defined_exception_classes() -> set[str]:
    found = set()
    for module_name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                value = getattr(importlib.import_module(module_name), node.name, None)
                if inspect.isclass(value) and issubclass(value, BaseException):
                    found.add(f"{module_name}.{node.name}")
    return found


def test_every_error_class_is_listed() -> None:
    assert _defined_exception_classes() == set(ERROR_BASES)


@pytest.mark.parametrize("qualified_name", sorted(ERROR_BASES))
def test_every_error_is_a_dex_local_engine_error_with_its_builtin_base(qualified_name: str) -> None:
    module_name, _, class_name = qualified_name.rpartition(".")
    error = getattr(importlib.import_module(module_name), class_name)
    assert issubclass(error, DexLocalEngineError)
    assert issubclass(error, ERROR_BASES[qualified_name])


def _raised_name(node: ast.Raise) -> str | None:
    target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return target.id if isinstance(target, ast.Name) else None


def test_no_bare_builtin_error_is_raised() -> None:
    offenders = [
        f"{module_name}:{node.lineno} raises {name}"
        for module_name, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Raise)
        and (name := _raised_name(node)) is not None
        and inspect.isclass(getattr(builtins, name, None))
        and issubclass(getattr(builtins, name), BaseException)
    ]
    assert offenders == []


def test_a_bad_engine_argument_is_a_value_error_too() -> None:
    from dex_local_engine.pull_dispatch import PullDispatcher

    with pytest.raises(DexLocalEngineError, match="no_capacity_retry_seconds must be positive"):
        PullDispatcher(no_capacity_retry_seconds=0)
    with pytest.raises(ValueError, match="got -1"):
        PullDispatcher(no_capacity_retry_seconds=-1)
