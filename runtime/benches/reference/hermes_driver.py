"""Drives the Python reference (Hermes Agent's tool search) over catalog files,
for the whole-process side-by-side of the `report` binary
(runtime/benches/src/bin/report/main.rs).

    python3 hermes_driver.py REFERENCE_DIR PHASE CONTEXT_TOKENS QUERY CATALOG...

REFERENCE_DIR holds the reference's `tools/registry.py` and
`tools/tool_search.py`, unpacked by the report from the published
hermes-agent wheel (never committed here). PHASE is `assemble` (register
every tool, then assemble the tools array for a session of CONTEXT_TOKENS)
or `search` (the same, then one `tool_search` call for QUERY). Each server
of each catalog registers as an MCP toolset, `mcp-SERVER`, its tools named
as the reference names MCP tools (`mcp__SERVER__TOOL`, characters outside
[A-Za-z0-9_] made `_`), each with a handler that does nothing: only the
reference's own registration, assembly and search code runs.

Prints one JSON line: the tool count, the tools sent, the matches found.
The report measures the wall time and peak RSS of the whole process.
"""

import json
import re
import sys


def component(value):
    return re.sub(r"[^A-Za-z0-9_]", "_", value)


def main(argv):
    reference, phase, context, query, *catalogs = argv[1:]
    sys.path.insert(0, reference)
    from tools.registry import registry
    import tools.tool_search as tool_search

    def handler(args, **kwargs):
        return ""

    names = set()
    for path in catalogs:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
        for server in document["servers"]:
            toolset = "mcp-" + server["name"]
            for tool in server["tools"]:
                name = "mcp__" + component(server["name"]) + "__" + component(tool["name"])
                schema = {
                    "name": name,
                    "description": tool.get("description") or "",
                    "parameters": tool.get("inputSchema") or {"type": "object", "properties": {}},
                }
                registry.register(
                    name=name,
                    toolset=toolset,
                    schema=schema,
                    handler=handler,
                    description=schema["description"],
                )
                names.add(name)

    config = tool_search.ToolSearchConfig.from_raw({"enabled": "on"})
    tool_defs = registry.get_definitions(names, quiet=True)
    assembly = tool_search.assemble_tool_defs(
        tool_defs, context_length=int(context), config=config
    )
    result = {"tools": len(names), "sent": len(assembly.tool_defs)}
    if phase == "search":
        answer = json.loads(
            tool_search.dispatch_tool_search(
                {"query": query}, current_tool_defs=tool_defs, config=config
            )
        )
        result["matches"] = [match["name"] for match in answer.get("matches", [])]
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv)
