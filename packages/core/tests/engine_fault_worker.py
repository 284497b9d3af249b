"""The Worker child of ``test_engine_fault_injection``: the Stepwise scenario agent alone, its
start claims logged (``claims.log`` in the state directory, see ``ClaimObservingClient``)."""

import os
import tempfile
from pathlib import Path
from typing import Any, cast

from agent_session_test_support.claim_agent import ClaimObservingClient
from dex import AsyncClient, Flow
from dex_agents import AgentSessionFlow
from dex_agents.testing import run_agent_worker
from dex_agents.testing.scenarios import MAIN_FLOW_TYPE, ScenarioAgentSpec, load_scenario_runner

STATE_DIR_ENV = "ENGINE_FAULT_STATE_DIR"
RUNNER = "stepwise"


def build_fault_flow(state_dir: Path) -> Flow[Any]:
    """The scenario agent (``lookup``, ``upsert``, ``send_once``, ...) under Stepwise."""
    return load_scenario_runner(RUNNER).build_flow(ScenarioAgentSpec(MAIN_FLOW_TYPE, state_dir))


def _observe_claims(flow: Flow[Any], state_dir: Path) -> Flow[Any]:
    """``flow`` with its Worker client's claims logged."""
    assert isinstance(flow, AgentSessionFlow)
    bind = flow.use_worker_client

    def use_worker_client(client: AsyncClient) -> None:
        bind(cast(AsyncClient, ClaimObservingClient(client, state_dir)))

    flow.use_worker_client = use_worker_client  # type: ignore[method-assign]
    return flow


def preload_worker() -> None:
    """Import what the Worker imports, in the warm parent the test's Workers fork from (the
    ``dex_agents.testing`` fork server): build the Flow once, in a throwaway directory."""
    with tempfile.TemporaryDirectory() as state_dir:
        build_fault_flow(Path(state_dir))


if __name__ == "__main__":
    state = Path(os.environ[STATE_DIR_ENV])
    run_agent_worker([_observe_claims(build_fault_flow(state), state)])
