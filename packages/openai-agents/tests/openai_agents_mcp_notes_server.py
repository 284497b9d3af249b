"""A stdio MCP server for the tests: a read tool and an idempotent write, each logging its calls
to the file named by ``NOTES_MCP_LOG``, so a test sees in which process and when they ran."""

import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notes")


def _log(line: str) -> None:
    with open(os.environ["NOTES_MCP_LOG"], "a") as log:
        log.write(line + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def count_words(text: str) -> str:
    """Count the words of a text."""
    _log(f"count_words {text}")
    return f"{len(text.split())} words"


@server.tool(annotations=ToolAnnotations(idempotentHint=True))
def save_note(text: str) -> str:
    """Save a note."""
    _log(f"save_note {text}")
    return "saved"


if __name__ == "__main__":
    server.run("stdio")
