"""A stdio MCP server for the tests: one read-only tool and one tool without annotations.

Each call is appended to the file named by ``MCP_CALL_LOG``, so a test counts the real calls.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("orders")


def _log(line: str) -> None:
    with Path(os.environ["MCP_CALL_LOG"]).open("a") as log:
        log.write(line + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def find_order(order_id: str) -> str:
    """Find an order by its ID."""
    _log(f"find_order {order_id}")
    return f"order {order_id}: delivered"


@server.tool()
def cancel_order(order_id: str) -> str:
    """Cancel an order."""
    _log(f"cancel_order {order_id}")
    return f"order {order_id}: cancelled"


if __name__ == "__main__":
    server.run("stdio")
