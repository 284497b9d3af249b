from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dex_agents import ToolEffect, ToolPolicy
from dex_agents.testing import InvocationLog
from dex_agents.testing._fork_server import FORK_SERVER_ENV
from dex_agents.testing.scenarios import (
    MCP_FLOW_TYPE,
    SCENARIO_MCP_READ_TOOL,
    SCENARIO_MCP_WRITE_TOOL,
    ScenarioAgentSpec,
    list_scenario_mcp_tools,
    mcp_extra_installed,
)

pytestmark = pytest.mark.skipif(not mcp_extra_installed(), reason="needs the mcp extra")


def test_the_scenario_mcp_server_is_listed_once_per_process(tmp_path: Path) -> None:
    # Every scenario Worker and test process builds the MCP agent, each with a state directory of
    # its own: only the first build of a process starts the server to list it.
    first = list_scenario_mcp_tools(
        ScenarioAgentSpec(MCP_FLOW_TYPE, tmp_path / "first", mcp_tools=True)
    )
    second = list_scenario_mcp_tools(
        ScenarioAgentSpec(MCP_FLOW_TYPE, tmp_path / "second", mcp_tools=True)
    )

    assert [tool.name for tool in second.tools] == [SCENARIO_MCP_READ_TOOL, SCENARIO_MCP_WRITE_TOOL]
    assert second.tools == first.tools
    assert second.source.cached_tools() == ()  # it did not list: its first call will
    (server,) = second.source.servers
    assert str(tmp_path / "second") in server.args  # its calls log to its own directory
    assert second.tool_policies == {
        SCENARIO_MCP_READ_TOOL: ToolPolicy(ToolEffect.READ),
        SCENARIO_MCP_WRITE_TOOL: ToolPolicy(
            ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False
        ),
    }


_ZYGOTE_CHILD = """
import asyncio, json, os, sys
from pathlib import Path
from dex_agents.testing.scenarios import (
    MCP_FLOW_TYPE, SCENARIO_MCP_READ_TOOL, ScenarioAgentSpec, scenario_mcp_tool_source,
    scenario_mcp_zygote, start_scenario_mcp_zygote,
)

def children_of(parent):
    found = []
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except (OSError, ValueError):
            continue
        if entry.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            found.append(int(entry))
    return found

with scenario_mcp_zygote() as for_a_block:  # a warm parent's own, for its preload
    pass
block_zygote_gone = for_a_block is not None and not Path(f"/proc/{for_a_block}").exists()
zygote = start_scenario_mcp_zygote()
spec = ScenarioAgentSpec(MCP_FLOW_TYPE, Path(sys.argv[1]), mcp_tools=True)
source = scenario_mcp_tool_source(spec)

async def main():
    output = await source.call_tool(SCENARIO_MCP_READ_TOOL, {"gate": ""}, idempotency_key="key-1")
    # The connection stays open in this event loop: its server still runs.
    forked = len(children_of(zygote))
    print(json.dumps({"zygote": zygote, "forked": forked, "output": output,
                      "block_zygote_gone": block_zygote_gone}))

asyncio.run(main())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="zygotes fork on Linux only")
def test_a_worker_with_a_zygote_forks_its_scenario_mcp_servers_warm(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if name != FORK_SERVER_ENV}
    child = subprocess.run(
        [sys.executable, "-c", _ZYGOTE_CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert child.returncode == 0, child.stderr

    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert isinstance(report["zygote"], int)
    assert report["block_zygote_gone"]  # killed and reaped when its block ended
    assert report["forked"] == 1  # the server the call connected to, forked by the zygote
    assert report["output"] == "lookup_stock ungated ok"
    assert InvocationLog(tmp_path / "invocations.jsonl").keys("lookup_stock") == ["key-1"]
