"""Worker child of the MCP session tests."""

import tempfile
from pathlib import Path

from dex_agents.testing import run_agent_worker

from mcp_test_support.agent import build_mcp_flow, flow_from_environment


def preload_worker() -> None:
    """Import what the Worker child imports, in the warm parent it forks from (``AgentTestStack``'s
    ``worker_preload_env``): build the agent once, with both kinds of MCP server."""
    with tempfile.TemporaryDirectory() as state_dir:
        build_mcp_flow(Path(state_dir), "http://127.0.0.1:9/mcp", "http://127.0.0.1:9/mcp")


if __name__ == "__main__":
    run_agent_worker([flow_from_environment()])
