"""The Worker child of ``test_engine_fault_injection``: the Stepwise scenario agent alone."""

import os
from pathlib import Path
from typing import Any

from dex import Flow
from dex_agents.testing import run_agent_worker
from dex_agents.testing.scenarios import MAIN_FLOW_TYPE, ScenarioAgentSpec, load_scenario_runner

STATE_DIR_ENV = "ENGINE_FAULT_STATE_DIR"
RUNNER = "stepwise"


def build_fault_flow(state_dir: Path) -> Flow[Any]:
    """The scenario agent (``lookup``, ``upsert``, ``send_once``, ...) under Stepwise."""
    return load_scenario_runner(RUNNER).build_flow(ScenarioAgentSpec(MAIN_FLOW_TYPE, state_dir))


if __name__ == "__main__":
    run_agent_worker([build_fault_flow(Path(os.environ[STATE_DIR_ENV]))])
