"""For coding agents and CI steps: a bounded wait that says where a startup stands and can be repeated
cheaply (`watch/run --wait-at-most`), and an MCP server over the same commands (`bootwatch mcp`)."""
