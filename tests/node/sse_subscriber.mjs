// The graphql-sse client (distinct connections mode) against a running server.
// Usage: node sse_subscriber.mjs <url> <reader key> <writer key> <session>
// 1. subscribes to workingMemoryChanged with the reader key; adds with the writer key until
//    the stream is live, then measures one add's latency: prints {"live": true, "latencyMs"}
// 2. waits for a line on stdin (the test revoked the reader key), adds again, and prints
//    {"afterRevocation": [events of those adds], "completed", "errors"}.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.GQLM_NODE_MODULES, "noop.js"));
const { createClient } = require("graphql-sse");

const [url, readerKey, writerKey, session] = process.argv.slice(2);
const SUBSCRIPTION =
  "subscription Watch($s: String!) { workingMemoryChanged(sessionId: $s) { event { kind itemId } } }";
const ADD =
  "mutation Add($s: String!, $c: String!) { addWorkingMemory(input: {content: $c, sessionId: $s}) { addedId } }";

const say = (value) => console.log(JSON.stringify(value));
const events = [];
let completed = false;
const errors = [];
let waiters = [];
const notify = () => {
  for (const wake of waiters.splice(0)) wake();
};
function waitFor(condition, ms) {
  return new Promise((resolve) => {
    const deadline = setTimeout(() => resolve(condition()), ms);
    const check = () => {
      if (condition()) {
        clearTimeout(deadline);
        resolve(true);
      } else waiters.push(check);
    };
    check();
  });
}

const client = createClient({
  url,
  headers: { Authorization: `Bearer ${readerKey}` },
  retryAttempts: 0,
});
client.subscribe(
  { query: SUBSCRIPTION, variables: { s: session } },
  {
    next: (value) => {
      events.push({ at: performance.now(), value });
      notify();
    },
    error: (error) => {
      errors.push(String(error?.message ?? JSON.stringify(error)));
      notify();
    },
    complete: () => {
      completed = true;
      notify();
    },
  },
);

async function add(content) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", Authorization: `Bearer ${writerKey}` },
    body: JSON.stringify({ query: ADD, variables: { s: session, c: content } }),
  });
  const body = await response.json();
  return body.data.addWorkingMemory.addedId;
}
const itemIds = (from) =>
  events.slice(from).map((e) => e.value?.data?.workingMemoryChanged?.event?.itemId);

// the stream is live once an event of ours arrives
for (let i = 0; i < 40 && events.length === 0 && !errors.length; i++) {
  await add(`warm-up ${i}`);
  await waitFor(() => events.length > 0 || errors.length > 0, 250);
}
if (!events.length) {
  say({ live: false, errors });
  process.exit(1);
}
const before = events.length;
const started = performance.now();
const id = await add("measured");
await waitFor(() => itemIds(before).includes(id), 5000);
const hit = events.slice(before).find((e) => e.value?.data?.workingMemoryChanged?.event?.itemId === id);
say({ live: true, latencyMs: hit ? hit.at - started : null });

await new Promise((resolve) => process.stdin.once("data", resolve));
const revokedAt = events.length;
const afterIds = [];
for (let i = 0; i < 5; i++) {
  afterIds.push(await add(`after revocation ${i}`));
  await waitFor(() => completed || errors.length > 0, 200);
}
await waitFor(() => completed || errors.length > 0, 10000);
say({
  afterRevocation: events
    .slice(revokedAt)
    .map((e) => e.value)
    .filter((v) => afterIds.includes(v?.data?.workingMemoryChanged?.event?.itemId)),
  lastEvents: events.slice(revokedAt).map((e) => e.value),
  completed,
  errors,
});
client.dispose();
process.exit(0);
