"""Worker child of the start-claim tests: serves ``build_claim_flow()`` until killed."""

from dex_agents.testing import run_agent_worker

from agent_session_test_support.claim_agent import build_claim_flow

if __name__ == "__main__":
    run_agent_worker([build_claim_flow()])
