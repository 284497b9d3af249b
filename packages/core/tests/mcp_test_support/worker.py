"""Worker child of the MCP session tests."""

from dex_agents.testing import run_agent_worker

from mcp_test_support.agent import flow_from_environment

if __name__ == "__main__":
    run_agent_worker([flow_from_environment()])
