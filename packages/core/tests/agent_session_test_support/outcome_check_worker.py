"""Worker child of the outcome check tests: serves ``build_outcome_check_flow()`` until killed."""

from dex_agents.testing import run_agent_worker

from agent_session_test_support.outcome_check_agent import build_outcome_check_flow

if __name__ == "__main__":
    run_agent_worker([build_outcome_check_flow()])
