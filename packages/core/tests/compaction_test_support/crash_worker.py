"""Worker child of the CompactContext crash test: serves the compacting Flow until killed."""

from dex_agents.testing import run_agent_worker

from compaction_test_support.crash_agent import build_compaction_crash_flow

if __name__ == "__main__":
    run_agent_worker([build_compaction_crash_flow()])
