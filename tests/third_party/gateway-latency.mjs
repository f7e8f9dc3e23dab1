// The gateway's tools/call latency as the official TypeScript SDK client
// sees it, over Streamable HTTP (a keep-alive fetch client) or stdio:
//   node gateway-latency.mjs http URL TOKEN [CALLS]
//   node gateway-latency.mjs stdio QUIVER_BIN CONFIG STATE_DIR [CALLS]
// Prints the median of CALLS (default 500) calls of tool_search, after 50
// warm-up calls. See docs/BENCHMARKS.md.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [mode, ...rest] = process.argv.slice(2);
let transport;
let calls;
if (mode === "http") {
  const [url, token, n] = rest;
  calls = Number(n ?? 500);
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
} else if (mode === "stdio") {
  const [bin, config, state, n] = rest;
  calls = Number(n ?? 500);
  transport = new StdioClientTransport({
    command: bin,
    args: ["serve", "--stdio", "--config", config, "--state-dir", state],
    stderr: "ignore",
  });
} else {
  console.error("usage: gateway-latency.mjs http URL TOKEN [CALLS] | stdio QUIVER_BIN CONFIG STATE_DIR [CALLS]");
  process.exit(2);
}
const client = new Client({ name: "gateway-latency", version: "1" });
await client.connect(transport);
const call = { name: "tool_search", arguments: { query: "count words" } };
for (let i = 0; i < 50; i++) await client.callTool(call);
const times = [];
for (let i = 0; i < calls; i++) {
  const start = process.hrtime.bigint();
  await client.callTool(call);
  times.push(Number(process.hrtime.bigint() - start) / 1e6);
}
times.sort((a, b) => a - b);
console.log(`${mode}: median ${times[Math.floor(times.length / 2)].toFixed(3)} ms over ${calls} calls`);
await client.close();
