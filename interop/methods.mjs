// methods.mjs signs and verifies with @octokit/webhooks-methods for the Go
// interop tests (interop_test.go). It is the reference side: it only calls the
// library and reports what the library said. One process handles a whole batch.
//
// Usage:
//
//   node methods.mjs examples --secret SECRET
//     Serialises every example payload of @octokit/webhooks-examples (every
//     <dir>/index.json of the package: api.github.com and the GHES versions)
//     with JSON.stringify, signs it with sign(), and prints
//       {"examples":[{"source":"api.github.com","event":"push","index":0,
//                     "payload":"<base64 of the UTF-8 bytes>","signature":"sha256=..."}]}
//
//   node methods.mjs batch < jobs.json
//     Reads {"secret":"...","jobs":[{"op":"sign","payload":"<base64>"},
//                                   {"op":"verify","payload":"<base64>","signature":"..."}]}
//     and prints {"results":[{"signature":"sha256=..."},{"valid":true},{"error":"..."}]},
//     one result per job, in order. A job the library rejects gets "error".
//
// Payloads travel as base64 so no byte is reinterpreted on the way; the
// library takes strings, so a payload that is not valid UTF-8 is an error
// rather than being silently replaced.
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { sign, verify } from "@octokit/webhooks-methods";

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function decodePayload(b64) {
  if (typeof b64 !== "string") {
    throw new TypeError("payload must be a base64 string");
  }
  return utf8.decode(Buffer.from(b64, "base64"));
}

function encodePayload(text) {
  return Buffer.from(text, "utf8").toString("base64");
}

async function examples(secret) {
  const require = createRequire(import.meta.url);
  const root = dirname(require.resolve("@octokit/webhooks-examples/package.json"));
  const sources = readdirSync(root, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(root, entry.name, "index.json")))
    .map((entry) => entry.name)
    .sort();
  const out = [];
  for (const source of sources) {
    const events = JSON.parse(readFileSync(join(root, source, "index.json"), "utf8"));
    for (const event of events) {
      for (const [index, example] of event.examples.entries()) {
        const payload = JSON.stringify(example);
        out.push({
          source,
          event: event.name,
          index,
          payload: encodePayload(payload),
          signature: await sign(secret, payload),
        });
      }
    }
  }
  return { examples: out };
}

async function batch(input) {
  const { secret, jobs } = JSON.parse(input);
  if (!Array.isArray(jobs)) {
    throw new TypeError('stdin must be {"secret":"...","jobs":[...]}');
  }
  const results = [];
  for (const job of jobs) {
    try {
      switch (job.op) {
        case "sign":
          results.push({ signature: await sign(secret, decodePayload(job.payload)) });
          break;
        case "verify":
          results.push({ valid: await verify(secret, decodePayload(job.payload), job.signature) });
          break;
        default:
          throw new TypeError(`unknown op ${JSON.stringify(job.op)}`);
      }
    } catch (error) {
      results.push({ error: String(error?.message ?? error) });
    }
  }
  return { results };
}

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { secret: { type: "string" } },
});

let result;
switch (positionals[0]) {
  case "examples":
    if (!values.secret) {
      console.error("methods.mjs: examples needs --secret");
      process.exit(2);
    }
    result = await examples(values.secret);
    break;
  case "batch":
    result = await batch(readFileSync(0, "utf8"));
    break;
  default:
    console.error("usage: node methods.mjs examples --secret SECRET | node methods.mjs batch < jobs.json");
    process.exit(2);
}
process.stdout.write(JSON.stringify(result) + "\n");
