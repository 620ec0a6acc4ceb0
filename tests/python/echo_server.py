"""A minimal MCP server on the official Python SDK (`MCPServer`) for the side-by-side round-trip
bench (`cargo run --release --example mcp-bench`): one `echo` tool returning a structured result
with a 10 KB `content` field, the same size as the bench's `patchdiff_read_target` result.

Usage: python3 tests/python/echo_server.py [PAYLOAD_BYTES]   (stdio transport)
"""

import sys
from typing import TypedDict

from mcp.server.mcpserver import MCPServer

PAYLOAD_BYTES = int(sys.argv[1]) if len(sys.argv) > 1 else 10 * 1024
PAYLOAD = ("x" * 63 + "\n") * (PAYLOAD_BYTES // 64)


class Echo(TypedDict):
    text: str
    content: str


server = MCPServer("echo-bench")


@server.tool()
def echo(text: str) -> Echo:
    """Return `text` and a fixed payload of PAYLOAD_BYTES bytes."""
    return {"text": text, "content": PAYLOAD}


if __name__ == "__main__":
    server.run()
