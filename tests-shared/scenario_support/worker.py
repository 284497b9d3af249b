"""The Worker child of the shared scenarios: the same Flows as the test, from the same registry."""

import os
from pathlib import Path

from dex_agents.testing import run_agent_worker

from scenario_support.runners import build_scenario_flows

RUNNER_ENV = "SCENARIO_RUNNER"
#: The root of the tests' state directories, one per session prefix (``session_state_dir``).
STATE_DIR_ENV = "SCENARIO_STATE_DIR"
#: Set to "1" when the test builds the MCP agent too (a test marked ``mcp_agent``).
MCP_AGENT_ENV = "SCENARIO_MCP_AGENT"

if __name__ == "__main__":
    run_agent_worker(
        build_scenario_flows(
            os.environ[RUNNER_ENV],
            Path(os.environ[STATE_DIR_ENV]),
            mcp_agent=os.environ.get(MCP_AGENT_ENV) == "1",
            per_session_state=True,
        )
    )
