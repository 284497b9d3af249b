"""Worker child of the LiteLLM session tests."""

from dex_agents.testing import run_agent_worker

from litellm_test_support.agent import build_flows, flows_from_environment


def preload_worker() -> None:
    """Import what the Worker child imports, in the warm parent it forks from (``AgentTestStack``'s
    ``worker_preload_env``): build the agents once, one per wire API."""
    build_flows("http://127.0.0.1:9")


if __name__ == "__main__":
    run_agent_worker(flows_from_environment())
