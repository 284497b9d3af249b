"""The Worker child of the shared scenarios: the same Flows as the test, from the same registry."""

import os
from pathlib import Path

from dex_agents.testing import run_agent_worker

from scenario_support.runners import build_scenario_flows

RUNNER_ENV = "SCENARIO_RUNNER"
STATE_DIR_ENV = "SCENARIO_STATE_DIR"

if __name__ == "__main__":
    run_agent_worker(build_scenario_flows(os.environ[RUNNER_ENV], Path(os.environ[STATE_DIR_ENV])))
