"""The Worker child of this package's crash tests: the shared scenario agents under this runner."""

import os
import tempfile
from pathlib import Path

from dex_agents.testing import run_agent_worker
from dex_agents.testing.scenarios import build_scenario_flows


def preload_worker() -> None:
    """Import what the Worker imports (the Claude Agent SDK, the MCP SDK), in the warm parent its
    children fork from (``AgentTestStack``'s ``worker_preload_env``), by building the Flows once in
    a throwaway state directory."""
    with tempfile.TemporaryDirectory() as state_dir:
        build_scenario_flows("claude-agent-sdk", Path(state_dir))


if __name__ == "__main__":
    run_agent_worker(
        build_scenario_flows("claude-agent-sdk", Path(os.environ["SCENARIO_STATE_DIR"]))
    )
