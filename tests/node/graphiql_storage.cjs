// Runs GraphiQL's page script (read from stdin) against stand-ins for the browser, React and
// GraphiQL, writes through the storage it hands GraphiQL what GraphiQL writes (its keys are
// "graphiql:"-prefixed), and prints where it landed as JSON. tests/test_ui.py runs it.
"use strict";

const vm = require("node:vm");
const fs = require("node:fs");

function memoryStorage() {
  const items = new Map();
  return {
    getItem: (key) => (items.has(key) ? items.get(key) : null),
    setItem: (key, value) => items.set(key, String(value)),
    removeItem: (key) => items.delete(key),
    key: (index) => [...items.keys()][index] ?? null,
    get length() {
      return items.size;
    },
    clear: () => items.clear(),
    entries: () => Object.fromEntries(items),
  };
}

let props = null;
const GraphiQL = { createFetcher: () => async () => ({}) };
const browser = {
  window: { location: { search: "", href: "http://127.0.0.1/graphql", pathname: "/graphql" } },
  history: { replaceState() {} },
  document: { getElementById: () => ({}) },
  sessionStorage: memoryStorage(),
  localStorage: memoryStorage(),
  URL,
  URLSearchParams,
  defaultHeaders: {},
  keyNeeded: true,
  GraphiQL,
  GraphiQLPluginExplorer: { explorerPlugin: () => ({}) },
  React: { useState: (value) => [value, () => {}], createElement: (type, p) => ({ type, props: p }) },
  ReactDOM: {
    createRoot: () => ({
      render(element) {
        const rendered = element.type(element.props || {});
        if (rendered.type === GraphiQL) props = rendered.props;
      },
    }),
  },
};
vm.runInNewContext(fs.readFileSync(0, "utf8"), browser);

const storage = props.storage;
const headers = process.argv[2];
if (storage) {
  storage.setItem("graphiql:headers", headers);
  storage.setItem("graphiql:queries", JSON.stringify({ queries: [{ query: "{ a }", headers }] }));
}
const written = {
  session: browser.sessionStorage.entries(),
  local: browser.localStorage.entries(),
  length: storage ? storage.length : null,
};
browser.sessionStorage.setItem("dashboard-key", "kept");  // another page's item in this tab
if (storage) storage.clear();
console.log(
  JSON.stringify({
    hasStorage: Boolean(storage),
    shouldPersistHeaders: props.shouldPersistHeaders,
    written,
    afterClear: browser.sessionStorage.entries(),
  }),
);
