// providers.mjs signs and verifies with the providers' own npm libraries
// for the Go interop test (providers_test.go): npm standardwebhooks (the
// Standard Webhooks reference library) and npm stripe (its
// webhooks.generateTestHeaderString and constructEvent). It is the
// reference side: it only calls the libraries and reports what they said.
//
// Usage: node providers.mjs < jobs.json
//   {"jobs":[{"op":"sign","provider":"standard"|"stripe","secret":"...","id":"msg_…","payload":"<base64>"},
//            {"op":"verify","provider":"standard"|"stripe","secret":"...","headers":{"Name":"value"},"payload":"<base64>"}]}
// prints {"results":[{"headers":{...}},{"valid":true},{"error":"..."}]}, one per job, in order.
import { readFileSync } from "node:fs";
import { Webhook } from "standardwebhooks";
import Stripe from "stripe";

const stripe = new Stripe("sk_test_interop_not_a_real_key");
const utf8 = new TextDecoder("utf-8", { fatal: true });
const { jobs } = JSON.parse(readFileSync(0, "utf8"));
const results = jobs.map((job) => {
  try {
    const payload = utf8.decode(Buffer.from(job.payload, "base64"));
    const lower = Object.fromEntries(Object.entries(job.headers || {}).map(([k, v]) => [k.toLowerCase(), v]));
    switch (`${job.op} ${job.provider}`) {
      case "sign standard": {
        const at = new Date();
        const signature = new Webhook(job.secret).sign(job.id, at, payload);
        return { headers: { "webhook-id": job.id, "webhook-timestamp": String(Math.floor(at.getTime() / 1000)), "webhook-signature": signature } };
      }
      case "sign stripe":
        return { headers: { "Stripe-Signature": stripe.webhooks.generateTestHeaderString({ payload, secret: job.secret }) } };
      case "verify standard":
        new Webhook(job.secret).verify(payload, lower);
        return { valid: true };
      case "verify stripe":
        stripe.webhooks.constructEvent(payload, lower["stripe-signature"], job.secret);
        return { valid: true };
    }
    return { error: `unknown job ${job.op} ${job.provider}` };
  } catch (e) {
    return { valid: false, error: String(e && e.message ? e.message : e) };
  }
});
process.stdout.write(JSON.stringify({ results }) + "\n");
