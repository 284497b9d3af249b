"""The Worker child of this package's crash tests: the shared scenario agents under this runner."""

import os
from pathlib import Path

from dex_agents.testing import run_agent_worker
from dex_agents.testing.scenarios import build_scenario_flows

if __name__ == "__main__":
    run_agent_worker(
        build_scenario_flows("claude-agent-sdk", Path(os.environ["SCENARIO_STATE_DIR"]))
    )
