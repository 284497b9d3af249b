"""The shared suite's runner for the smallest adapter of "Writing an adapter" (test code only).

The guide's code block is executed as written (``guide_namespace``), so the suite runs the
guide's ``TinyRunner`` itself. ``TinyScenarioRunner`` is what an adapter's testing module holds
on ``ScenarioRunnerBase``: each scenario tool as a ``TinyTool`` and the scripted model as a
``TinyModel``. No optional feature: the scenarios that need tool questions, tool tasks, plan mode,
MCP tools or a context window are skipped for it.

``tests-shared`` runs under it with ``DEX_AGENTS_EXTRA_SCENARIO_RUNNERS=tiny=<this module>:SCENARIO_RUNNER``.
"""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from dex_agents import AgentFrameworkRunner, require_deferred_tool_execution
from dex_agents.testing.scenarios import (
    ScenarioAgentSpec,
    ScenarioFeature,
    ScenarioRunnerBase,
    ScenarioTool,
    confirm_tool_outcome,
    run_scenario_tool_call,
    scripted_reply,
)

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "writing-an-adapter.md"
RUNNER_NAME = "tiny"

_GATE_SCHEMA = {
    "type": "object",
    "properties": {"gate": {"type": "string"}},
    "required": ["gate"],
    "additionalProperties": False,
}


@cache
def guide_namespace() -> dict[str, Any]:
    """The names the guide's one Python block defines (``TinyRunner``, ``TinyTool``, ...)."""
    (block,) = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    # A module of its own, as if the block were a file: dataclasses look their module up.
    module = types.ModuleType("writing_an_adapter")
    sys.modules[module.__name__] = module
    exec(compile(block, str(GUIDE), "exec"), module.__dict__)
    return module.__dict__


class TinyScenarioRunner(ScenarioRunnerBase[Any]):
    """The scenario agent as a TinyModel agent."""

    name = RUNNER_NAME
    features = frozenset[ScenarioFeature]()

    def scenario_tool(self, spec: ScenarioAgentSpec, tool: ScenarioTool) -> Any:
        async def run(gate: str) -> str:
            key = require_deferred_tool_execution().idempotency_key
            return await run_scenario_tool_call(spec, tool, gate, key)

        return guide_namespace()["TinyTool"](run, _GATE_SCHEMA, tool.effect)

    def confirm_tool(self, spec: ScenarioAgentSpec) -> Any:
        def confirm(gate: str) -> object:
            return confirm_tool_outcome(spec, require_deferred_tool_execution())

        return guide_namespace()["TinyTool"](confirm, _GATE_SCHEMA)

    def report_tool(self, spec: ScenarioAgentSpec) -> None:
        return None  # tool tasks are an optional feature the smallest adapter leaves out

    def build_runner(
        self, spec: ScenarioAgentSpec, tools: Sequence[Any]
    ) -> AgentFrameworkRunner[Any]:
        names = [tool.name for tool in spec.tools] + ["confirm"]

        async def model(request: Any) -> Any:
            # A TinyRequest is a ScenarioModelCall: its user texts, call index and tool outputs.
            reply = await scripted_reply(spec, request, request.settings)
            if not reply.tool_calls:
                return reply.text or ""
            return [(call.tool, dict(call.arguments)) for call in reply.tool_calls]

        return guide_namespace()["TinyRunner"](model, dict(zip(names, tools, strict=True)))


SCENARIO_RUNNER = TinyScenarioRunner().scenario_runner()
"""The smallest adapter under the shared suite: no optional feature."""
