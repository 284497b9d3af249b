"""The shared scenario suite, parametrised over every runner installed (``scenario_support.runners``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from dex_agents.testing import AgentTestStack
from dex_agents.testing.scenarios import DEADLINE_FLOW_TYPE, MAIN_FLOW_TYPE, MCP_FLOW_TYPE
from scenario_support.harness import Scenario
from scenario_support.runners import RUNNER_NAMES, build_scenario_flows
from scenario_support.worker import MCP_AGENT_ENV, RUNNER_ENV, STATE_DIR_ENV

TESTS_SHARED_DIR = Path(__file__).resolve().parent


@pytest.fixture(params=RUNNER_NAMES)
def runner_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mcp_agent: the scenario also builds the MCP agent (ScenarioMcpAgent), whose runner may "
        "list the scenario MCP server when it builds the Flow",
    )


@pytest.fixture
async def scenario(
    runner_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Scenario]:
    state_dir = tmp_path / "state"
    mcp_agent = request.node.get_closest_marker("mcp_agent") is not None
    flows = build_scenario_flows(runner_name, state_dir, mcp_agent=mcp_agent)
    by_type = {flow.get_flow_type(): flow for flow in flows}
    async with AgentTestStack(
        tmp_path / "stack",
        flows,
        "scenario_support.worker",
        worker_cwd=TESTS_SHARED_DIR,
        worker_env={
            RUNNER_ENV: runner_name,
            STATE_DIR_ENV: str(state_dir),
            MCP_AGENT_ENV: "1" if mcp_agent else "0",
        },
    ) as stack:
        worker = await stack.start_worker()
        yield Scenario(
            runner=runner_name,
            stack=stack,
            state_dir=state_dir,
            sessions=stack.sessions(by_type[MAIN_FLOW_TYPE]),
            deadline_sessions=stack.sessions(by_type[DEADLINE_FLOW_TYPE]),
            worker=worker,
            mcp_sessions=stack.sessions(by_type[MCP_FLOW_TYPE])
            if MCP_FLOW_TYPE in by_type
            else None,
        )
