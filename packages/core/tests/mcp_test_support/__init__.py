"""Real MCP servers for dex_agents.mcp's tests, built on the MCP SDK (stdio and Streamable HTTP)."""
