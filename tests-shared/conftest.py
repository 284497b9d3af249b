"""The shared scenario suite, parametrised over every runner installed (``scenario_support.runners``).

Each runner's scenarios share one engine and one Worker child per xdist worker (the
``dex_agents.testing`` pytest plugin's ``dex_agent_stack``), all of a runner's tests in one xdist
group (``--dist loadgroup``), so a framework is imported once per runner, not once per test. A
test's sessions, gates and invocation log carry its own session-ID prefix. A test marked
``dex_own_stack`` (it SIGKILLs its Worker) gets an engine and Worker of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from dex import Flow
from dex_agents.testing import FileGate, PrefixedSessionClient
from dex_agents.testing.pytest_plugin import AgentStackFactory
from dex_agents.testing.scenarios import (
    DEADLINE_FLOW_TYPE,
    MAIN_FLOW_TYPE,
    MCP_FLOW_TYPE,
    session_state_dir,
)
from scenario_support.harness import Scenario
from scenario_support.runners import RUNNER_NAMES, build_scenario_flows
from scenario_support.worker import MCP_AGENT_ENV, PRELOAD_ENV_NAMES, RUNNER_ENV, STATE_DIR_ENV

TESTS_SHARED_DIR = Path(__file__).resolve().parent

# The test process's Flows, built once per runner and MCP agent choice. They only give its Client
# the Flow types and RPCs: every Step runs in a Worker child, which builds its own Flows on the
# test's state directory (STATE_DIR_ENV), so one set serves every test, own stack or not, and a
# test of its own stack does not build them again (for an MCP agent: start and list its server).
_FLOWS: dict[tuple[str, bool], list[Flow[Any]]] = {}


@pytest.fixture(params=RUNNER_NAMES)
def runner_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("dex_agents"):
        # An environment installed before dex-agents declared its pytest11 entry point (an
        # editable install keeps its old metadata until the next `uv sync`).
        config.pluginmanager.import_plugin("dex_agents.testing.pytest_plugin")
    config.addinivalue_line(
        "markers",
        "mcp_agent: the scenario also builds the MCP agent (ScenarioMcpAgent), whose runner may "
        "list the scenario MCP server when it builds the Flow",
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # One xdist worker runs all of a runner's tests: one Worker child serves its shared-stack
    # tests, and its tests of their own stack fork their Workers from the fork server that has
    # already imported the framework. Spread over every xdist worker, each worker's first such
    # test paid for a fork server and the framework's import again (tests-shared alone: 27
    # scenario fork servers and 492 s of CPU before, 7 and 392 s grouped).
    for item in items:
        callspec = getattr(item, "callspec", None)
        runner = callspec.params.get("runner_name") if callspec is not None else None
        if runner is not None:
            item.add_marker(pytest.mark.xdist_group(f"scenario-{runner}"))


@pytest.fixture(scope="session")
def scenario_state_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the shared Workers' tests keep their state, a directory per session prefix."""
    return tmp_path_factory.mktemp("scenario-state")


@pytest.fixture
async def scenario(
    runner_name: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    dex_agent_stack: AgentStackFactory,
    dex_session_prefix: str,
    scenario_state_root: Path,
) -> AsyncIterator[Scenario]:
    mcp_agent = request.node.get_closest_marker("mcp_agent") is not None
    own_stack = dex_agent_stack.own_stack
    # One root per runner: the Worker with the MCP agent serves the other agents too, and the
    # engine may hand it any session of theirs, so both Workers must keep state alike.
    state_root = (tmp_path if own_stack else scenario_state_root) / "state" / runner_name
    flows = _flows(runner_name, scenario_state_root, mcp_agent=mcp_agent)
    by_type = {flow.get_flow_type(): flow for flow in flows}
    worker_env = {
        RUNNER_ENV: runner_name,
        STATE_DIR_ENV: str(state_root),
        MCP_AGENT_ENV: "1" if mcp_agent else "0",
    }
    async with dex_agent_stack(
        flows,
        "scenario_support.worker",
        worker_cwd=TESTS_SHARED_DIR,
        # Every runner serves the same Flow types, so each runner has an engine of its own.
        engine=f"scenario-{runner_name}",
        worker_env=worker_env,
        # Workers fork from a parent that has already imported the runner's framework (a fork
        # server of dex_agents.testing): a test that kills its Worker restarts it cheaply.
        worker_preload_env={name: worker_env[name] for name in PRELOAD_ENV_NAMES},
    ) as stack:
        worker = await (stack.start_worker() if own_stack else stack.shared_worker())

        def sessions(flow_type: str) -> PrefixedSessionClient:
            return PrefixedSessionClient(stack.client, by_type[flow_type], dex_session_prefix)

        state_dir = session_state_dir(state_root, dex_session_prefix)
        yield Scenario(
            runner=runner_name,
            stack=stack,
            state_dir=state_dir,
            prefix=dex_session_prefix,
            sessions=sessions(MAIN_FLOW_TYPE),
            deadline_sessions=sessions(DEADLINE_FLOW_TYPE),
            worker=worker,
            own_stack=own_stack,
            mcp_sessions=sessions(MCP_FLOW_TYPE) if MCP_FLOW_TYPE in by_type else None,
        )
        # A Step still stopped at one of this test's gates holds a task slot of the shared
        # Worker: open them all, so the next tests get every slot.
        for reached in (state_dir / "gates").glob("*.reached"):
            FileGate(state_dir, reached.name.removesuffix(".reached")).release()


def _flows(runner: str, state_root: Path, *, mcp_agent: bool) -> list[Flow[Any]]:
    key = (runner, mcp_agent)
    if key not in _FLOWS:
        _FLOWS[key] = build_scenario_flows(
            runner, state_root / "state" / runner, mcp_agent=mcp_agent, per_session_state=True
        )
    return _FLOWS[key]
