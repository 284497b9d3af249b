"""Worker child of the crash tests: serves ``build_crash_flow()`` until killed."""

from dex_agents.testing import run_agent_worker

from agent_session_test_support.crash_agent import build_crash_flow

if __name__ == "__main__":
    run_agent_worker([build_crash_flow()])
