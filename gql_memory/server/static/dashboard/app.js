// The memory dashboard: sessions and their working memory, stale memory, hybrid search with
// its explanation and a graph neighbourhood, kept live by two subscriptions (memoryEvents for
// the namespace, workingMemoryChanged for the focused session). Where the server lets this
// browser in without a key (a loopback server with API keys optional) it connects by itself;
// where it does not, the page says a key is needed. The API key is kept in sessionStorage
// (this tab only, gone when it closes) and sent as a bearer token; it never appears in a URL.

import { Client } from "./client.js";
import { coalesced, h } from "./dom.js";
import { GraphView } from "./graph.js";
import { MEMORY_EVENTS, STATS } from "./operations.js";
import { SearchView } from "./search.js";
import { SessionsView } from "./sessions.js";
import { ConsolidationView } from "./consolidation.js";
import { StaleView } from "./stale.js";

const KEY_STORAGE = "gql-memory.apiKey";
const STAT_NAMES = {
  workingMemory: "working memory",
  staleMemory: "stale",
  insights: "insights",
  episodes: "episodes",
  nodes: "nodes",
  edges: "edges",
  sessions: "sessions",
};

/** A number the server put in the page (its settings). */
function serverSetting(name) {
  return Number(document.querySelector(`meta[name="${name}"]`).content);
}

class Dashboard {
  constructor(client) {
    this.client = client;
    this.message = document.getElementById("message");
    this.status = document.getElementById("live-status");
    this.keyInput = document.getElementById("api-key");
    const report = (error) => this.report(error);
    const limits = {
      capacity: serverSetting("working-memory-capacity"),
      critical: serverSetting("critical-importance"),
      floor: serverSetting("attention-floor"),
    };
    this.sessions = new SessionsView(client, limits, report);
    this.stale = new StaleView(client, report);
    this.consolidation = new ConsolidationView(client, report);
    this.search = new SearchView(client, report);
    this.graph = new GraphView(client, report);
    this.streams = { focused: "off", events: "off" };
    this.sessions.onFocus = (session) => this.search.sessionFocused(session);
    this.sessions.onLive = (state) => this.#streamState("focused", state);
    this.events = null;
    this.refreshStats = coalesced(() => this.#loadStats());

    document.getElementById("key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const key = this.keyInput.value.trim();
      sessionStorage.setItem(KEY_STORAGE, key);
      this.connect(key);
    });
    document.getElementById("forget-key").addEventListener("click", () => {
      sessionStorage.removeItem(KEY_STORAGE);
      this.keyInput.value = "";
      this.disconnect();
    });
    // a page that is left closes its streams (and may come back from the back/forward cache)
    window.addEventListener("pagehide", () => this.disconnect());
    window.addEventListener("pageshow", (event) => event.persisted && this.resume());
    this.resume();
  }

  /** Connects with the key this tab keeps, if it keeps one; else without a key if allowed. */
  resume() {
    const saved = sessionStorage.getItem(KEY_STORAGE);
    if (saved !== null) {
      this.keyInput.value = saved;
      this.connect(saved);
    } else {
      this.#connectWithoutKey();
    }
  }

  /** The server said in the page whether this browser needs a key (meta key-needed). */
  #connectWithoutKey() {
    if (document.querySelector('meta[name="key-needed"]').content === "false") {
      this.connect("");
    } else {
      this.#askForKey();
    }
  }

  #askForKey() {
    this.message.textContent =
      "This server needs an API key from this browser. Paste one above and press Connect " +
      "(a read-only key is enough: gql-memory keys create --namespace <name> --scopes read).";
    this.message.className = "notice";
    this.message.hidden = false;
    this.keyInput.focus();
  }

  connect(key) {
    this.disconnect();
    this.client.key = key;
    this.message.hidden = true;
    this.sessions.start();
    this.refreshAll();
    this.events = this.client.subscribe(
      MEMORY_EVENTS,
      {},
      {
        open: (reconnected) => reconnected && this.refreshAll(),
        next: ({ memoryEvents: event }) => this.#eventArrived(event),
        state: (state, error) => {
          this.#streamState("events", state);
          if (error) this.report(error);
        },
      },
    );
  }

  disconnect() {
    this.events?.close();
    this.events = null;
    this.sessions.stop();
    this.streams = { focused: "off", events: "off" };
    this.#streamState("events", "off");
  }

  refreshAll() {
    this.refreshStats();
    this.sessions.discover();
    this.stale.refresh();
    this.consolidation.refresh();
    this.graph.refresh();
  }

  report(error) {
    this.message.textContent = error.message ?? String(error);
    this.message.className = "";
    this.message.hidden = false;
  }

  #eventArrived(event) {
    this.refreshStats();
    this.sessions.eventArrived(event);
    this.stale.eventArrived(event);
    this.consolidation.eventArrived(event);
    this.graph.eventArrived(event);
  }

  async #loadStats() {
    try {
      const { stats } = await this.client.execute(STATS);
      document.getElementById("stats").replaceChildren(
        ...Object.entries(STAT_NAMES).map(([field, name]) =>
          h("div", {}, h("dt", {}, name), h("dd", {}, stats[field])),
        ),
      );
    } catch (error) {
      this.report(error);
    }
  }

  /** Live once both streams are; the state is an attribute too, for tests and styles. */
  #streamState(stream, state) {
    this.streams[stream] = state;
    const states = Object.values(this.streams);
    const overall = states.includes("failed")
      ? "failed"
      : states.every((s) => s === "live")
        ? "live"
        : states.every((s) => s === "off")
          ? "off"
          : "connecting";
    const text = { live: "live", connecting: "connecting…", failed: "refused", off: "offline" };
    this.status.dataset.state = overall;
    this.status.textContent = text[overall];
  }
}

async function main() {
  const response = await fetch("persisted-documents.json");
  const manifest = await response.json();
  const endpoint = new URL("../graphql", window.location.href).href;
  new Dashboard(new Client(endpoint, manifest));
}

main();
