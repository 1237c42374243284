// mcp_client.mjs drives `hookline mcp` with the official MCP TypeScript SDK
// client (@modelcontextprotocol/sdk), as a coding agent would, for the Go
// test TestMCPWithTheTypeScriptSDK (mcp_test.go). It also runs the
// developer's server: it verifies X-Hub-Signature-256 with
// @octokit/webhooks-methods and answers 500 to an issue titled "crash".
//
// Usage: node mcp_client.mjs --hookline BIN --state-home DIR --secret S
//
// It prints one JSON object a line on stdout: {"target": URL} once the
// server listens; then, after reading "go" on stdin (forward runs and has
// the failing delivery), the steps; {"publish": true} when its wait for the
// next delivery has begun (the Go test then publishes one); and at the end
// {"done": {...what it found}} or {"error": "..."}.
import { createServer } from "node:http";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { verify } from "@octokit/webhooks-methods";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const { values: args } = parseArgs({
  options: { hookline: { type: "string" }, "state-home": { type: "string" }, secret: { type: "string" } },
});
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

// The developer's server.
const seen = []; // {verified, debug, title} of each request
const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", async () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const verified = await verify(args.secret, body, req.headers["x-hub-signature-256"] ?? "").catch(() => false);
    let title = "";
    try {
      title = JSON.parse(body).issue?.title ?? "";
    } catch {}
    seen.push({ verified, debug: req.headers["x-debug"] ?? "", title });
    if (!verified) {
      res.writeHead(401).end("bad signature");
    } else if (title === "crash") {
      res.writeHead(500).end("TypeError: cannot read the crash");
    } else {
      res.writeHead(200).end("ok");
    }
  });
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
say({ target: `http://127.0.0.1:${server.address().port}` });

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
await lines.next(); // "go"

const outputs = []; // every tool's text, to look for the secret
function text(result) {
  const t = result.content.filter((c) => c.type === "text").map((c) => c.text).join("");
  outputs.push(t);
  return t;
}
function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

const client = new Client({ name: "ts-sdk-test", version: "1.0.0" });
const updates = [];
let updated;
const gotUpdate = new Promise((resolve) => (updated = resolve));
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  updates.push(n.params.uri);
  updated(n.params.uri);
});
try {
  await client.connect(
    new StdioClientTransport({
      command: args.hookline,
      args: ["mcp"],
      env: { ...process.env, XDG_STATE_HOME: args["state-home"] },
      stderr: "inherit",
    }),
  );
  const done = { server: client.getServerVersion() };

  const { tools } = await client.listTools();
  done.tools = tools.map((t) => t.name).sort();

  const failed = JSON.parse(text(await client.callTool({ name: "list_deliveries", arguments: { outcome: "target-failed" } })));
  check(failed.deliveries.length === 1, `list_deliveries target-failed: ${JSON.stringify(failed)}`);
  const id = failed.deliveries[0].id;
  done.failedStatus = failed.deliveries[0].targets[0].status;

  const detail = JSON.parse(text(await client.callTool({ name: "get_delivery", arguments: { id } })));
  done.answer = detail.targets[0].attempts[0].response.body;
  done.requestTitle = JSON.parse(detail.request.body).issue.title;

  const uri = `hookline://deliveries/${id}`;
  await client.subscribeResource({ uri });

  const replay = JSON.parse(
    text(
      await client.callTool({
        name: "replay_edited",
        arguments: { id, patch: [{ op: "replace", path: "/issue/title", value: "fixed" }], headers: { "X-Debug": ["1"] } },
      }),
    ),
  );
  done.replay = { outcome: replay.outcome, status: replay.targets[0].status, replayOf: replay.replay_of };
  done.serverSawReplay = seen.at(-1);

  let timer;
  done.updated = await Promise.race([gotUpdate, new Promise((r) => (timer = setTimeout(() => r("no update in 20 s"), 20000)))]);
  clearTimeout(timer);
  const read = await client.readResource({ uri });
  done.replaysAfterUpdate = JSON.parse(read.contents[0].text).replays;

  const sent = JSON.parse(
    text(
      await client.callTool({
        name: "send_test_event",
        arguments: { event: "issues.opened", patch: [{ op: "replace", path: "/issue/title", value: "from the agent" }] },
      }),
    ),
  );
  done.sent = { sent: sent.sent, status: sent.targets[0].status };
  done.serverSawSent = seen.at(-1);

  const waiting = client.callTool({ name: "wait_for_delivery", arguments: { event: "issues", timeout_seconds: 60 } });
  say({ publish: true });
  const next = JSON.parse(text(await waiting));
  done.waited = next.deliveries.map((d) => d.delivery_id);

  const refused = await client.callTool({ name: "send_test_event", arguments: { event: "issues.openned" } });
  done.refused = { isError: refused.isError, text: text(refused) };

  done.secretInOutput = outputs.some((o) => o.includes(args.secret));
  say({ done });
} catch (err) {
  say({ error: String(err?.stack ?? err) });
} finally {
  await client.close();
  server.close();
}
