// GraphiQL for gql-memory: strawberry's page (graphiql.html), served with its bundles from
// this server. Queries and mutations go over HTTP with the headers editor's headers (put
// {"Authorization": "Bearer <key>"} there); subscriptions go over graphql-transport-ws, whose
// connection_init payload carries the same headers. `defaultHeaders` comes from the page, and
// so does `keyNeeded`: whether this browser's requests need an API key on this server.
// The welcome text's lines stay within the editor's width (at most 50 characters).
/* global React, ReactDOM, GraphiQL, GraphiQLPluginExplorer, defaultHeaders, keyNeeded */
"use strict";

const WELCOME = keyNeeded
  ? `# Welcome to GraphiQL for gql-memory.
#
# This server needs an API key from you. Put it
# in the Headers tab below:
#
#   {"Authorization": "Bearer gqlm_..."}
#
# (\`gql-memory keys create\` makes one), then run
# the query with Ctrl-Enter or the ▶ button.`
  : `# Welcome to GraphiQL for gql-memory.
#
# No API key is needed from this machine: run the
# query below with Ctrl-Enter or the ▶ button.
# The README's tour goes on from here.`;

const EXAMPLE_QUERY = `${WELCOME}

{
  stats {
    workingMemory
    staleMemory
    insights
    nodes
  }
}
`;

// The query and variables live in the URL, so a link shares them (headers never do).
const parameters = Object.fromEntries(new URLSearchParams(window.location.search));

function updateURL(data) {
  Object.assign(parameters, data);
  const search = new URLSearchParams(
    Object.entries(parameters).filter(([, value]) => Boolean(value)),
  ).toString();
  history.replaceState(null, "", search ? `?${search}` : window.location.pathname);
}

const fetchURL = window.location.href.split("?")[0];

function webSocketURL(url) {
  const parsed = new URL(url);
  parsed.protocol = parsed.protocol === "https:" ? "wss:" : "ws:";
  parsed.hash = "";
  return parsed.toString();
}

// Everything GraphiQL keeps (the headers editor with its Authorization key, the tabs, the
// history, which also records each query's headers) goes to sessionStorage: this tab only,
// gone when it closes, as the dashboard keeps its key. localStorage would keep the key on
// disk for every later visitor of this browser profile.
const NAMESPACE = "graphiql:";

function graphiqlKeys() {
  const keys = [];
  for (let i = 0; i < sessionStorage.length; i += 1) {
    const key = sessionStorage.key(i);
    if (key.startsWith(NAMESPACE)) keys.push(key);
  }
  return keys;
}

const tabStorage = {
  getItem: (key) => sessionStorage.getItem(key),
  setItem: (key, value) => sessionStorage.setItem(key, value),
  removeItem: (key) => sessionStorage.removeItem(key),
  get length() {
    return graphiqlKeys().length;
  },
  clear() {
    for (const key of graphiqlKeys()) sessionStorage.removeItem(key);
  },
};

const fetcher = GraphiQL.createFetcher({
  url: fetchURL,
  headers: defaultHeaders,
  subscriptionUrl: webSocketURL(fetchURL),
});

function GraphiQLWithExplorer() {
  const [query, setQuery] = React.useState(parameters.q || EXAMPLE_QUERY);
  const [variables, setVariables] = React.useState(parameters.variables);

  function onEditQuery(newQuery) {
    setQuery(newQuery);
    updateURL({ q: newQuery });
  }

  function onEditVariables(newVariables) {
    setVariables(newVariables);
    updateURL({ variables: newVariables });
  }

  return React.createElement(GraphiQL, {
    fetcher,
    defaultEditorToolsVisibility: true,
    plugins: [GraphiQLPluginExplorer.explorerPlugin()],
    query,
    variables,
    onEditQuery,
    onEditVariables,
    inputValueDeprecation: true,
    isHeadersEditorEnabled: true,
    shouldPersistHeaders: true,
    storage: tabStorage,
  });
}

ReactDOM.createRoot(document.getElementById("graphiql")).render(
  React.createElement(GraphiQLWithExplorer),
);
