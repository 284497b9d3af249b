"""The core without its extras: it imports and runs, and dex_agents.litellm and dex_agents.mcp
say which extra to install. Each check runs in a child interpreter with the package blocked."""

from __future__ import annotations

import subprocess
import sys


def _run_without(blocked: list[str], code: str) -> subprocess.CompletedProcess[str]:
    # A None entry in sys.modules makes `import <name>` raise ImportError, as if not installed.
    prelude = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in blocked)
    return subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120
    )


def test_importing_dex_agents_litellm_without_litellm_names_the_extra() -> None:
    result = _run_without(["litellm"], "import dex_agents.litellm")
    assert result.returncode != 0
    assert (
        'ImportError: dex_agents.litellm needs LiteLLM: install it with pip install "dex-agents[litellm]"'
        in result.stderr
    )


def test_importing_dex_agents_mcp_without_mcp_names_the_extra() -> None:
    result = _run_without(["mcp"], "import dex_agents.mcp")
    assert result.returncode != 0
    assert (
        'ImportError: dex_agents.mcp needs the MCP SDK: install it with pip install "dex-agents[mcp]"'
        in result.stderr
    )


def test_the_core_and_stepwise_scenarios_run_without_either_extra() -> None:
    code = (
        "import dex_agents, dex_agents.stepwise, dex_agents._demo\n"
        "from dex_agents.testing.scenarios import ScenarioFeature, load_scenario_runner\n"
        "runner = load_scenario_runner('stepwise')\n"
        "print(sorted(runner.features))\n"
        "dex_agents._demo.build_demo_flow()\n"
    )
    result = _run_without(["litellm", "mcp"], code)
    assert result.returncode == 0, result.stderr
    assert "mcp_tools" not in result.stdout and "tool_tasks" in result.stdout
