"""Worker child of the LiteLLM session tests."""

from dex_agents.testing import run_agent_worker

from litellm_test_support.agent import flows_from_environment

if __name__ == "__main__":
    run_agent_worker(flows_from_environment())
