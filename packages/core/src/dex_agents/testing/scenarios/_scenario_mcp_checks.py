"""What every adapter's MCP wrapper tests check, against the scenario MCP server, written once.

An adapter offers an ``McpToolSource``'s tools in its framework's tool type (its ``mcp_*_tool``
and ``mcp_*_tools``). Its tests prove the same things in every framework; the parts that do not
depend on the framework are here, so an adapter's test holds only its agent and the framework's
own checks (the schema its tool offers, its annotations):

- :class:`ScenarioMcpTurn`: one turn that calls the server's read, its write (which waits for
  approval) and the read with a bad argument, each in its own tool Step with the session's
  idempotency key in ``_meta``;
- :func:`check_mcp_tool_refusals`: the wrapper refuses anything but a source and a listed tool;
- :func:`mcp_wrapper_error_without_mcp`: without the mcp extra the package still imports, and the
  wrapper's error names the extra.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

from dex_agents import AgentInterrupt, AgentSessionClient, AgentSessionOptions, AgentSnapshot
from dex_agents.exceptions import ConfigurationTypeError
from dex_agents.testing._waiting import (
    pending_interrupt,
    wait_for_agent_snapshot,
    wait_for_turn_end,
)
from dex_agents.testing.scenarios._scenario_agent import (
    ScenarioAgentSpec,
    ScenarioToolCall,
    invocation_log,
)
from dex_agents.testing.scenarios._scenario_mcp_server import (
    SCENARIO_MCP_READ_TOOL,
    SCENARIO_MCP_WRITE_TOOL,
    scenario_mcp_tool_source,
)

if TYPE_CHECKING:
    from dex_agents import ListedTool
    from dex_agents.mcp import McpToolSource

__all__ = [
    "ScenarioMcpTurn",
    "check_mcp_tool_refusals",
    "mcp_wrapper_error_without_mcp",
]

_READ_MCP_NAME: Final = "lookup_stock"
_WRITE_MCP_NAME: Final = "send_note"
_IMPORT_TIMEOUT_SECONDS: Final = 120


class ScenarioMcpTurn:
    """One turn of an agent offering the scenario MCP server's tools through an adapter's wrapper.

    The model makes :attr:`calls` (in one response, or spread over several) and then answers.
    :meth:`run` drives the turn: the write waits for approval without having run, is approved,
    and the turn ends. :meth:`check_keys` then checks that the read and the write each ran once
    on the server with the call's idempotency key.

    Example:
        >>> import tempfile
        >>> turn = ScenarioMcpTurn(Path(tempfile.mkdtemp()))
        >>> list(turn.calls)
        ['read', 'write', 'bad']
    """

    calls: ClassVar[Mapping[str, ScenarioToolCall]] = {
        "read": ScenarioToolCall(SCENARIO_MCP_READ_TOOL, {"gate": ""}),
        "write": ScenarioToolCall(SCENARIO_MCP_WRITE_TOOL, {}),
        # The server's schema wants a string: its error answer is a failed result.
        "bad": ScenarioToolCall(SCENARIO_MCP_READ_TOOL, {"gate": 7}),
    }
    """The model's calls by call ID, in order."""
    user_text: ClassVar[str] = "check the stock and send a note"
    read_output: ClassVar[str] = f"{_READ_MCP_NAME} ungated ok"
    """What the server answers to the read."""
    write_output: ClassVar[str] = f"{_WRITE_MCP_NAME} ungated ok"
    """What the server answers to the write."""

    def __init__(self, state_dir: Path, flow_type: str = "Mcp") -> None:
        self.state_dir = state_dir
        self.spec = ScenarioAgentSpec(flow_type, state_dir)
        self.source: McpToolSource = scenario_mcp_tool_source(self.spec)

    def session_options(self) -> AgentSessionOptions:
        """The source's own policies: the read's ``readOnlyHint`` makes it a read; the write has
        no hints, so it waits for approval."""
        return AgentSessionOptions(tool_policies=self.source.tool_policies())

    async def run(
        self,
        sessions: AgentSessionClient,
        session_id: str,
        *,
        write_tool: str = SCENARIO_MCP_WRITE_TOOL,
    ) -> AgentSnapshot:
        """Start the turn, approve the write (offered as ``write_tool``: a framework's own MCP
        client may name it otherwise) once it waits without having run, and return the snapshot
        at the turn's end.

        Raises:
            AssertionError: The first approval asked for is not the write's, or the write ran
                before it was approved.
        """
        await sessions.start_session(session_id, self.user_text)
        interrupt: AgentInterrupt = await wait_for_agent_snapshot(
            sessions,
            session_id,
            pending_interrupt,
            "the write's approval",
        )
        if interrupt.tool_name != write_tool:
            raise AssertionError(f"approval asked for {interrupt.tool_name}, not the write")
        if invocation_log(self.state_dir).count(_WRITE_MCP_NAME):
            raise AssertionError("the write ran before it was approved")
        if not await sessions.resolve_interrupt(session_id, interrupt.interrupt_id, approved=True):
            raise AssertionError("the write's approval was not taken")
        return await wait_for_turn_end(sessions, session_id)

    def check_keys(
        self, scoped_session_id: str, *, read_id: str = "read", write_id: str = "write"
    ) -> None:
        """The read and the write ran once each on the server, each with its call's key
        (``<session>/turn-1/<call id>``) in ``_meta``; the bad read never reached it.

        Raises:
            AssertionError: Another key, or another number of calls, reached the server.
        """
        log = invocation_log(self.state_dir)
        for name, call_id in ((_READ_MCP_NAME, read_id), (_WRITE_MCP_NAME, write_id)):
            expected = [f"{scoped_session_id}/turn-1/{call_id}"]
            if log.keys(name) != expected:
                raise AssertionError(f"{name} ran with keys {log.keys(name)}, not {expected}")


def check_mcp_tool_refusals(
    wrap: Callable[[Any, Any], object], source: McpToolSource, listed: ListedTool
) -> None:
    """``wrap`` (an adapter's ``mcp_*_tool(source, listed)``) refuses a value that is not an
    ``McpToolSource``, and a tool's name instead of the ``ListedTool``, each with the kit's
    ``ConfigurationTypeError``.

    Raises:
        AssertionError: ``wrap`` accepted either, or refused it another way.
    """
    wrong = [
        (({}, listed), "McpToolSource, got dict"),
        ((source, listed.name), "McpToolSource.list_tools() returned, got str"),
    ]
    for arguments, message in wrong:
        try:
            wrap(*arguments)
        except ConfigurationTypeError as error:
            if message not in str(error):
                raise AssertionError(f"{error} does not say {message!r}") from error
        else:
            raise AssertionError(f"{getattr(wrap, '__name__', wrap)!r} accepted {arguments!r}")


def mcp_wrapper_error_without_mcp(package: str, wrapper: str) -> str:
    """Import ``package`` in a child interpreter without the MCP SDK, call its ``wrapper`` as
    ``wrapper(object(), ListedTool(...))``, and return the last line of the error it printed.

    Raises:
        AssertionError: The call did not fail.

    Example:
        >>> mcp_wrapper_error_without_mcp("dex_agents", "no_such_wrapper")
        "AttributeError: module 'dex_agents' has no attribute 'no_such_wrapper'"
    """
    code = (
        "import sys\nsys.modules['mcp'] = None\n"
        f"import {package} as adapter\n"
        "from dex_agents import ListedTool\n"
        f"adapter.{wrapper}(object(), ListedTool('t', 'T'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=_IMPORT_TIMEOUT_SECONDS,
        check=False,
    )
    if result.returncode == 0:
        raise AssertionError(f"{package}.{wrapper} worked without the MCP SDK")
    return result.stderr.splitlines()[-1]
