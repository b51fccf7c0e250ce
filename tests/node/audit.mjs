// graphql-http's GraphQL over HTTP audit against a running server.
// Usage: node audit.mjs <url>; prints the results as one JSON array.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.GQLM_NODE_MODULES, "noop.js"));
const { auditServer } = require("graphql-http");

const results = await auditServer({ url: process.argv[2] });
console.log(
  JSON.stringify(
    results.map((r) => ({ id: r.id, name: r.name, status: r.status, reason: r.reason ?? null })),
  ),
);
