// Stale memory: what left working memory, newest first, with why (LRU eviction, decay,
// manual archive), across all sessions; refetched when memoryEvents reports an archive.

import { coalesced, h } from "./dom.js";
import { STALE_MEMORY } from "./operations.js";

const REASONS = {
  LRU_EVICTION: "evicted (capacity)",
  DECAY_EVICTION: "decayed",
  MANUAL_ARCHIVE: "archived",
};
// memoryEvents kinds that add to stale memory or take from it.
const STALE_KINDS = new Set([
  "EVICTED",
  "DECAYED",
  "ARCHIVED",
  "RESTORED",
  "SESSION_FORGOTTEN",
  "RESYNC",
]);

export class StaleView {
  constructor(client, report) {
    this.client = client;
    this.report = report;
    this.table = document.getElementById("stale-items");
    this.reason = document.getElementById("stale-reason");
    this.reason.replaceChildren(
      h("option", { value: "" }, "every reason"),
      ...Object.entries(REASONS).map(([value, text]) => h("option", { value }, text)),
    );
    this.reason.addEventListener("change", () => this.refresh());
    this.refresh = coalesced(() => this.#load());
  }

  eventArrived({ kind }) {
    if (STALE_KINDS.has(kind)) this.refresh();
  }

  async #load() {
    try {
      const reason = this.reason.value || null;
      const data = await this.client.execute(STALE_MEMORY, { reason });
      this.#render(data.staleMemory.edges.map((edge) => edge.node));
    } catch (error) {
      this.report(error);
    }
  }

  #render(items) {
    const rows = items.map((item) => {
      const kind = item.reason.toLowerCase();
      const badge = h("span", { class: `reason ${kind}` }, REASONS[item.reason]);
      return h(
        "tr",
        { "data-id": item.id },
        h("td", { class: "content" }, item.originalContent),
        h("td", {}, badge),
        h("td", { class: "session-id" }, item.sessionId),
        h("td", { class: "when" }, new Date(item.archivedAt).toLocaleString()),
      );
    });
    if (!rows.length) {
      rows.push(h("tr", {}, h("td", { class: "empty", colspan: 4 }, "Nothing archived")));
    }
    this.table.tBodies[0].replaceChildren(...rows);
  }
}
