// Sessions and working memory: each session's fill (n/capacity) with one small bar per item,
// and the focused session's items with importance and live attention. The focused session
// follows workingMemoryChanged (its events carry the items, attention included); the others
// are refetched when memoryEvents says they changed. The list names the sessions that hold
// something (dialogue, archived items or working memory), as the header's count does: never
// the default session, nor a watched one, while they are empty.

import { bar, coalesced, h, score } from "./dom.js";
import { SESSION_FILL, SESSIONS, WORKING_MEMORY, WORKING_MEMORY_CHANGED } from "./operations.js";

// memoryEvents kinds that change a session's working memory or its items' attention.
const SESSION_KINDS = new Set([
  "ADDED",
  "EVICTED",
  "ARCHIVED",
  "DECAYED",
  "RESTORED",
  "ACCESSED",
  "CLEARED",
  "SESSION_FORGOTTEN",
  "DIALOGUE_STORED",
]);
// memoryEvents kinds that leave a turn or an archived item in the session.
const HOLDING_KINDS = new Set(["DIALOGUE_STORED", "EVICTED", "ARCHIVED", "DECAYED"]);
const DEFAULT_SESSION = "default";

export class SessionsView {
  constructor(client, limits, report) {
    this.client = client;
    this.limits = limits;
    this.report = report;
    this.fills = new Map(); // session -> [{importance, attention}], null until fetched
    this.held = new Set(); // sessions seen in dialogue or stale memory
    this.refreshers = new Map();
    this.focused = DEFAULT_SESSION;
    this.chosen = false; // whether the user picked the focused session
    this.items = [];
    this.changed = null; // the event {kind, itemId} that produced this.items
    this.eventsSeen = 0; // workingMemoryChanged events received
    this.stream = null;
    this.onFocus = () => {};
    this.onLive = () => {};
    this.list = document.getElementById("session-list");
    this.table = document.getElementById("working-items");
    this.title = document.getElementById("focused-session");
    this.fill = document.getElementById("focused-fill");
    document.getElementById("critical-importance").textContent = limits.critical;
    document.getElementById("watch-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = document.getElementById("watch-session");
      const session = input.value.trim();
      if (session) this.focus(session);
      input.value = "";
    });
    this.discover = coalesced(() => this.#discover());
    this.refreshFocused = coalesced(() => this.#refreshFocused());
  }

  start() {
    this.focus(this.focused, { chosen: false });
    this.discover();
  }

  stop() {
    this.stream?.close();
    this.stream = null;
  }

  /** Follows one session: its items now, then its workingMemoryChanged events. */
  focus(session, { chosen = true } = {}) {
    this.chosen ||= chosen;
    this.stop();
    this.focused = session;
    this.fills.set(session, this.fills.get(session) ?? null);
    this.items = [];
    this.changed = null;
    this.render();
    this.onFocus(session);
    this.stream = this.client.subscribe(
      WORKING_MEMORY_CHANGED,
      { sessionId: session },
      {
        // the items as they are now; the events that follow bring every change
        open: () => this.refreshFocused(),
        next: ({ workingMemoryChanged: change }) => {
          this.eventsSeen += 1;
          this.#show(change.items, change.event);
        },
        state: (state, error) => {
          this.onLive(state);
          if (error) this.report(error);
        },
      },
    );
  }

  /** A memoryEvents event: refetch what it changed. */
  eventArrived({ kind, sessionId }) {
    if (kind === "RESYNC") {
      this.discover();
      this.refreshFocused();
      return;
    }
    if (!sessionId || !SESSION_KINDS.has(kind)) return;
    if (kind === "SESSION_FORGOTTEN") this.held.delete(sessionId);
    if (HOLDING_KINDS.has(kind)) this.held.add(sessionId);
    if (sessionId !== this.focused) {
      this.#refresher(sessionId)();
    } else if (kind === "DIALOGUE_STORED") {
      // a stored turn ages the items (attention) without a workingMemoryChanged event
      this.refreshFocused();
    }
  }

  async #discover() {
    try {
      const data = await this.client.execute(SESSIONS);
      const seen = [...data.rawDialogue.edges, ...data.staleMemory.edges].map((e) => e.node);
      for (const { sessionId } of seen) {
        this.held.add(sessionId);
        if (!this.fills.has(sessionId)) this.fills.set(sessionId, null);
      }
      // until the user picks one, the page follows the most recently active session
      const latest = mostRecent(seen);
      if (!this.chosen && latest && latest !== this.focused) {
        this.focus(latest, { chosen: false });
      }
      // the focused session's items come with its stream
      const others = [...this.fills.keys()].filter((session) => session !== this.focused);
      await Promise.all(others.map((session) => this.#refresher(session)()));
    } catch (error) {
      this.report(error);
    }
  }

  #refresher(session) {
    if (!this.refreshers.has(session)) {
      this.refreshers.set(
        session,
        coalesced(async () => {
          if (session === this.focused) return this.refreshFocused();
          try {
            const data = await this.client.execute(SESSION_FILL, { sessionId: session });
            this.fills.set(session, data.workingMemory);
            this.renderList();
          } catch (error) {
            this.report(error);
          }
        }),
      );
    }
    return this.refreshers.get(session);
  }

  async #refreshFocused() {
    const [session, seen] = [this.focused, this.eventsSeen];
    try {
      const data = await this.client.execute(WORKING_MEMORY, { sessionId: session });
      // an event that arrived meanwhile carried newer items than this answer
      if (session === this.focused && seen === this.eventsSeen) {
        this.#show(data.workingMemory, null);
      }
    } catch (error) {
      this.report(error);
    }
  }

  #show(items, event) {
    this.items = items;
    this.changed = event;
    this.fills.set(this.focused, items);
    this.render();
  }

  render() {
    this.renderList();
    this.renderItems();
  }

  /** Whether a session holds anything: dialogue, archived items or working memory. */
  #holdsMemory(session) {
    return this.held.has(session) || this.fills.get(session)?.length > 0;
  }

  renderList() {
    const capacity = this.limits.capacity;
    const sessions = [...this.fills.keys()]
      .filter((session) => this.#holdsMemory(session))
      .sort((a, b) =>
        a === DEFAULT_SESSION ? -1 : b === DEFAULT_SESSION ? 1 : a.localeCompare(b),
      );
    if (!sessions.length) {
      this.list.replaceChildren(h("li", { class: "empty" }, "No sessions yet"));
      return;
    }
    this.list.replaceChildren(
      ...sessions.map((session) => {
        const items = this.fills.get(session);
        const count = items ? items.length : null;
        return h(
          "li",
          { class: session === this.focused ? "session focused" : "session" },
          h("button", { type: "button", onclick: () => this.focus(session) }, session),
          h("span", { class: "count" }, count === null ? "…" : `${count}/${capacity}`),
          bar(count === null ? 0 : count / capacity, "fill-meter"),
          this.#attentionStrip(items ?? []),
        );
      }),
    );
  }

  /** One small bar per item: height its attention, colour whether it is critical. */
  #attentionStrip(items) {
    return h(
      "span",
      { class: "strip", title: "attention of each item" },
      items.map((item) => {
        const tick = h("span", {
          class: item.importance > this.limits.critical ? "tick critical" : "tick",
        });
        tick.style.height = `${Math.round(Math.min(1, item.attention) * 100)}%`;
        return tick;
      }),
    );
  }

  renderItems() {
    const { capacity, critical, floor } = this.limits;
    this.title.textContent = this.focused;
    this.fill.textContent = `${this.items.length}/${capacity}`;
    const changedId = this.changed?.itemId;
    const rows = this.items.map((item) =>
      h(
        "tr",
        {
          class: item.id === changedId ? `item changed ${this.changed.kind.toLowerCase()}` : "item",
          "data-id": item.id,
        },
        h("td", { class: "content" }, item.content),
        h(
          "td",
          { class: "measure" },
          bar(item.importance, item.importance > critical ? "importance critical" : "importance"),
          h("span", { class: "num" }, score(item.importance)),
        ),
        h(
          "td",
          { class: "measure" },
          bar(item.attention, item.attention <= floor ? "attention fading" : "attention"),
          h("span", { class: "num" }, score(item.attention)),
        ),
        h("td", { class: "num" }, item.mentionCount),
      ),
    );
    if (!rows.length) {
      rows.push(h("tr", {}, h("td", { class: "empty", colspan: 4 }, "No items in working memory")));
    }
    this.table.tBodies[0].replaceChildren(...rows);
  }
}

/** The session of the newest turn or archived item, or null. */
function mostRecent(seen) {
  let latest = null;
  let when = "";
  for (const { sessionId, timestamp, archivedAt } of seen) {
    const at = new Date(timestamp ?? archivedAt).toISOString();
    if (at > when) [latest, when] = [sessionId, at];
  }
  return latest;
}
