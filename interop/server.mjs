// server.mjs serves @octokit/webhooks' createNodeMiddleware on 127.0.0.1 for
// the Go interop tests (interop_test.go). It is the reference side: keep it a
// plain, documented use of the library, with no behaviour of its own.
//
// Usage: node server.mjs --secret SECRET [--timeout-ms 9000]
//
// It listens on an ephemeral port, prints that port and a newline on stdout,
// and serves until it is killed or its stdin closes (so a parent that dies
// cannot leave it running). Logs go to stderr.
//
// Handlers branch on the payload's top-level "interop" field, the same
// contract the Go side of the test implements:
//   "fail"        the handler throws Error("interop: handler failed")
//   "fail-status" the handler throws an error with .status = 403
//   "fail-utf8"   the handler throws an error with a non-ASCII message
//   "stall"       the handler never settles (to reach the middleware timeout)
//   anything else the handler succeeds
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { Webhooks, createNodeMiddleware } from "@octokit/webhooks";

const { values } = parseArgs({
  options: {
    secret: { type: "string" },
    "timeout-ms": { type: "string", default: "9000" },
  },
});
if (!values.secret) {
  console.error("server.mjs: --secret is required");
  process.exit(2);
}
const timeout = Number(values["timeout-ms"]);
if (!Number.isInteger(timeout) || timeout <= 0) {
  console.error(`server.mjs: --timeout-ms ${values["timeout-ms"]} is not a positive integer`);
  process.exit(2);
}

const webhooks = new Webhooks({ secret: values.secret });
webhooks.onAny(({ payload }) => {
  switch (payload?.interop) {
    case "fail":
      throw new Error("interop: handler failed");
    case "fail-status":
      throw Object.assign(new Error("interop: handler failed with status 403"), { status: 403 });
    case "fail-utf8":
      throw new Error("interop: handler failed: échec ✗");
    case "stall":
      return new Promise(() => {});
  }
});

const middleware = createNodeMiddleware(webhooks, { timeout });

// createNodeMiddleware's promise rejects for some inputs (a signed JSON body
// that is null, a number or a string makes its receive throw a TypeError that
// its error path cannot unpack). A bare createServer(middleware) would then
// crash on the unhandled rejection; log it instead, leaving the request
// unanswered exactly as the middleware leaves it, and keep serving.
process.on("unhandledRejection", (error) => {
  console.error("server.mjs: unhandled rejection from the middleware:", error);
});

const server = createServer(middleware);
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${server.address().port}\n`);
});

process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
process.on("SIGTERM", () => process.exit(0));
