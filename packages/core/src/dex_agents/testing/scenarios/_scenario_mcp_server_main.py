"""The scenario agent's stdio MCP server (see ``scenario_mcp_server``); needs the mcp extra.

Kept apart, without postponed annotations, because the MCP SDK reads each tool's signature.
"""

import argparse
import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from dex_agents.testing import FileGate, InvocationLog
from dex_agents.testing.scenarios._scenario_agent import session_state_dir

_IDEMPOTENCY_KEY_META_KEY: Final = "io.superdurable.dex/idempotencyKey"
_PER_SESSION_STATE: bool = False


async def _record_and_gate(
    state_dir: Path,
    worker_gone: Callable[[], bool],
    tool: str,
    gate: str,
    meta: Mapping[str, Any] | None,
) -> str:
    key = str((meta or {}).get(_IDEMPOTENCY_KEY_META_KEY, ""))
    if _PER_SESSION_STATE:  # state_dir is a root; the key is <session>/<turn>/<call>
        state_dir = session_state_dir(state_dir, key.partition("/")[0])
    InvocationLog(state_dir / "invocations.jsonl").record(tool, key=key)
    if gate:
        file_gate = FileGate(state_dir, gate)
        file_gate.mark_reached()
        while not file_gate.is_released:
            if worker_gone():
                os._exit(4)  # the Worker died mid-call: never finish the call behind its back
            await asyncio.sleep(0.01)
    return f"{tool} {gate or 'ungated'} ok"


def _serve(state_dir: Path, worker_gone: Callable[[], bool]) -> None:
    server = MCPServer("scenario")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def lookup_stock(ctx: Context, gate: str = "") -> str:
        """Read something."""
        meta = ctx.request_context.meta
        return await _record_and_gate(state_dir, worker_gone, "lookup_stock", gate, meta)

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    async def send_note(ctx: Context, gate: str = "") -> str:
        """A write that must never repeat."""
        meta = ctx.request_context.meta
        return await _record_and_gate(state_dir, worker_gone, "send_note", gate, meta)

    server.run()


def main(arguments: Sequence[str], *, worker_gone: Callable[[], bool]) -> None:
    """Serve MCP on stdio until stdin ends; ``worker_gone`` says when the Worker that started
    the server has died (a gated call then exits at once)."""
    global _PER_SESSION_STATE
    parser = argparse.ArgumentParser(description="The scenario agent's stdio MCP server.")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--per-session-state", action="store_true")
    parsed = parser.parse_args(arguments)
    _PER_SESSION_STATE = parsed.per_session_state
    _serve(Path(parsed.state_dir), worker_gone)


if __name__ == "__main__":
    import sys

    _parent_pid = os.getppid()
    main(sys.argv[1:], worker_gone=lambda: os.getppid() != _parent_pid)
