"""The Worker child of the shared scenarios: the same Flows as the test, from the same registry."""

import os
import tempfile
from pathlib import Path
from typing import Any

from dex import Flow
from dex_agents.testing import run_agent_worker
from dex_agents.testing.scenarios import scenario_mcp_zygote, start_scenario_mcp_zygote

from scenario_support.runners import build_scenario_flows

RUNNER_ENV = "SCENARIO_RUNNER"
#: The root of the tests' state directories, one per session prefix (``session_state_dir``).
STATE_DIR_ENV = "SCENARIO_STATE_DIR"
#: Set to "1" when the test builds the MCP agent too (a test marked ``mcp_agent``).
MCP_AGENT_ENV = "SCENARIO_MCP_AGENT"
#: The variables that decide what this module imports (``AgentTestStack``'s worker_preload_env).
PRELOAD_ENV_NAMES = (RUNNER_ENV,)


def _build_flows(state_root: Path, *, mcp_agent: bool) -> list[Flow[Any]]:
    return build_scenario_flows(
        os.environ[RUNNER_ENV], state_root, mcp_agent=mcp_agent, per_session_state=True
    )


def preload_worker() -> None:
    """Import everything this runner's Workers import, in the warm parent they fork from: build
    the Flows once in a throwaway state directory, with the MCP agent, so one parent serves the
    Workers with and without it (and its listing of the scenario MCP server, which a zygote
    serves for the while, is theirs)."""
    with scenario_mcp_zygote(), tempfile.TemporaryDirectory() as state_root:
        _build_flows(Path(state_root), mcp_agent=True)


if __name__ == "__main__":
    mcp_agent = os.environ.get(MCP_AGENT_ENV) == "1"
    flows = _build_flows(Path(os.environ[STATE_DIR_ENV]), mcp_agent=mcp_agent)
    if mcp_agent:
        # Before the Worker's threads start: its MCP servers fork from a warm parent.
        start_scenario_mcp_zygote()
    run_agent_worker(flows)
