"""Drives the real `patchdiff mcp` binary with the official MCP Python SDK (an independent
client), over stdio and, when configured, Streamable HTTP. SPEC M1, M2, M3, M5, M6, C3.

Usage: python3 tests/python/sdk_client.py CONFIG.json

CONFIG: {"exe": path, "env": {PATCHDIFF_* for the child}, "fixture": path, "sha256": hex,
         "http": {"url": ..., "token": ...} (optional)}

Prints one `ok: <check>` line per passed check and exits 0, or prints `FAIL: ...` and exits 1.
Exit 3 means the SDK is not importable (CI installs it from tests/requirements.txt).
"""

import asyncio
import json
import sys

try:
    import mcp
    from mcp import ClientSession, MCPError, StdioServerParameters
    from mcp.client.stdio import stdio_client
except ImportError as exc:  # pragma: no cover - the failure itself is the message
    print(
        "FAIL: the official MCP Python SDK is not importable "
        f"(python3 -m pip install -r tests/requirements.txt): {exc}"
    )
    sys.exit(3)

OBSERVED = {
    "patchdiff_read_target",
    "patchdiff_find_occurrences",
    "patchdiff_observe_scope",
    "patchdiff_submit_observed_operations",
    "patchdiff_save",
    "patchdiff_replay",
}
FULL = OBSERVED | {
    "patchdiff_init_target",
    "patchdiff_export_target",
    "patchdiff_audit",
    "patchdiff_worker_status",
    # Replica leases (R1-R3): operator-only, like the four above.
    "patchdiff_replica_acquire",
    "patchdiff_replica_renew",
    "patchdiff_replica_release",
    "patchdiff_replica_submit",
    "patchdiff_replica_changes",
}

passed = []


def check(name, condition, detail=""):
    if not condition:
        print(f"FAIL: {name}: {detail}")
        sys.exit(1)
    passed.append(name)
    print(f"ok: {name}")


async def with_session(cfg, profile, body):
    env = dict(cfg["env"])
    env["PATCHDIFF_MCP_PROFILE"] = profile
    params = StdioServerParameters(command=cfg["exe"], args=["mcp"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)


async def tool_names(session):
    return {t.name for t in (await session.list_tools()).tools}


async def expect_jsonrpc_error(session, tool, args):
    try:
        result = await session.call_tool(tool, args)
    except MCPError as err:
        return err
    return result


async def full_checks(cfg, session):
    names = await tool_names(session)
    check("full profile lists observed + operator tools", names == FULL, sorted(names))
    r = await session.call_tool(
        "patchdiff_init_target",
        {
            "target": "calendar",
            "fixture": cfg["fixture"],
            "sha256": cfg["sha256"],
            "language": "javascript",
            "reset": True,
        },
    )
    check("init_target succeeds", not r.is_error, r)
    check("init_target version 0", r.structured_content["version"] == 0, r.structured_content)


async def observed_checks(cfg, session):
    names = await tool_names(session)
    check("observed profile lists exactly six tools", names == OBSERVED, sorted(names))

    r = await session.call_tool("patchdiff_read_target", {"target": "calendar"})
    sc = r.structured_content
    check(
        "read_target structured content",
        not r.is_error
        and {"target", "version", "revision", "sha256", "language", "content"} <= set(sc),
        r,
    )
    check(
        "read_target content travels once: the text block is a summary naming the ids",
        len(r.content) == 1
        and r.content[0].text.startswith("revision ")
        and sc["sha256"] in r.content[0].text
        and sc["content"] not in r.content[0].text,
        r.content,
    )

    r = await session.call_tool(
        "patchdiff_find_occurrences", {"target": "calendar", "text": "this.windows.push(w);"}
    )
    occ = r.structured_content["occurrences"]
    check(
        "find_occurrences returns both with their scope",
        len(occ) == 2 and occ[0]["scope"]["name"] == "Calendar.addWindow",
        occ,
    )

    r = await session.call_tool(
        "patchdiff_observe_scope", {"target": "calendar", "scope": "Calendar.addWindow"}
    )
    obs = r.structured_content
    check(
        "observe_scope returns an observation",
        not r.is_error and {"observation_id", "revision", "scope", "sha256", "text"} <= set(obs),
        r,
    )

    r = await session.call_tool(
        "patchdiff_submit_observed_operations",
        {
            "target": "calendar",
            "request_key": "ambiguous",
            "base_revision": 0,
            "operations": [
                {
                    "observation_id": obs["observation_id"],
                    "old_text": "this.windows.push(w);",
                    "new_text": "x();",
                }
            ],
        },
    )
    reasons = (r.structured_content or {}).get("reasons", [])
    check(
        "ambiguous old_text is an isError receipt with advice",
        r.is_error
        and r.structured_content["outcome"] == "rejected"
        and "occurs 2 times in scope" in reasons[0]
        and "Calendar.addWindow; include more context" in reasons[0],
        r,
    )

    r = await session.call_tool(
        "patchdiff_submit_observed_operations",
        {
            "target": "calendar",
            "request_key": "dedupe",
            "base_revision": 0,
            "operations": [
                {
                    "observation_id": obs["observation_id"],
                    "old_text": "this.windows.push(w);\n    this.windows.push(w);",
                    "new_text": "this.windows.push(w);",
                }
            ],
        },
    )
    check(
        "submit accepted",
        not r.is_error and r.structured_content["outcome"] == "accepted",
        r,
    )

    r = await session.call_tool("patchdiff_save", {"target": "calendar"})
    check("save makes version 1", not r.is_error and r.structured_content["version"] == 1, r)

    r = await session.call_tool("patchdiff_replay", {"target": "calendar"})
    check(
        "replay pages the journal",
        not r.is_error and {"entries", "next_cursor", "has_more"} <= set(r.structured_content),
        r,
    )

    r = await session.call_tool("patchdiff_read_target", {"target": "no-such-target"})
    check(
        "unknown target is an isError result with a code",
        r.is_error and "code" in r.structured_content["error"],
        r,
    )

    err = await expect_jsonrpc_error(
        session, "patchdiff_init_target", {"target": "x", "fixture": "/x", "sha256": "0", "language": "javascript"}
    )
    check(
        "full-profile tool refused at the profile boundary",
        isinstance(err, MCPError) and "not available in the observed profile" in err.message,
        err,
    )

    for label, args in [
        ("wrong type", {"target": 5}),
        ("unknown field", {"target": "calendar", "profile": "full"}),
        ("missing field", {}),
    ]:
        # MCP 2025-11-25 (SEP-1303): an isError result the model can correct itself from.
        r = await expect_jsonrpc_error(session, "patchdiff_read_target", args)
        check(
            f"malformed arguments ({label}) are an isError result",
            not isinstance(r, MCPError)
            and r.is_error
            and r.structured_content["error"]["code"] == "INVALID_ARGUMENTS",
            r,
        )


async def workspace_checks(cfg, session):
    names = await tool_names(session)
    check("workspace profile lists the editing tools", names == OBSERVED, sorted(names))


async def http_checks(cfg):
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = cfg["http"]
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {http['token']}"})
    async with client:
        async with streamable_http_client(http["url"], http_client=client) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                check("HTTP initialize", init.server_info.name == "patchdiff", init.server_info)
                names = await tool_names(session)
                check("HTTP tools/list is the observed six", names == OBSERVED, sorted(names))
                r = await session.call_tool("patchdiff_read_target", {"target": "calendar"})
                check("HTTP read_target", not r.is_error and r.structured_content["version"] == 1, r)


async def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cfg = json.load(f)
    print(f"python MCP SDK {getattr(mcp, '__version__', '')}".strip())
    await with_session(cfg, "full", lambda s: full_checks(cfg, s))
    await with_session(cfg, "observed", lambda s: observed_checks(cfg, s))
    await with_session(cfg, "workspace", lambda s: workspace_checks(cfg, s))
    if cfg.get("http"):
        await http_checks(cfg)
    print(f"python-sdk: {len(passed)} checks passed")


if __name__ == "__main__":
    asyncio.run(main())
