"""``scenario_runner_getattr``: an adapter's scenario runner, imported on first use."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["scenario_runner_getattr"]


def scenario_runner_getattr(testing_package: str, runner_class: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` of an adapter's ``testing`` package: ``SCENARIO_RUNNER`` and
    ``runner_class`` come from ``<testing_package>._scenario_runner``, imported when first asked
    for. The scenario runner imports ``dex_agents.testing``; a user of the package's scripted
    model alone never pays for it.

    The function raises ``AttributeError`` for any other name, as a module does.

    Example:
        >>> __getattr__ = scenario_runner_getattr("echo.testing", "EchoScenarioRunner")
        >>> __getattr__("reference_agent")
        Traceback (most recent call last):
        ...
        AttributeError: module 'echo.testing' has no attribute 'reference_agent'
    """

    def module_getattr(name: str) -> Any:
        if name not in ("SCENARIO_RUNNER", runner_class):
            raise AttributeError(f"module {testing_package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{testing_package}._scenario_runner")
        return getattr(module, name)

    return module_getattr
