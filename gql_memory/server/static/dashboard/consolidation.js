// Consolidation: what it merged, superseded, digested and made an alias, newest first, with
// its reason (and whether it was undone); refetched when insights change.

import { coalesced, h } from "./dom.js";
import { CONSOLIDATION } from "./operations.js";

// memoryEvents kinds after which a pass may have acted (or an action been undone).
const INSIGHT_KINDS = new Set(["INSIGHT_ADDED", "INSIGHT_DELETED", "INSIGHT_INVALIDATED", "RESYNC"]);

const KINDS = {
  MERGE: "merged",
  SUPERSEDE: "superseded",
  DIGEST: "digest",
  ENTITY_MERGE: "entity alias",
};

export class ConsolidationView {
  constructor(client, report) {
    this.client = client;
    this.report = report;
    this.table = document.getElementById("consolidation-actions");
    this.refresh = coalesced(() => this.#load());
  }

  eventArrived({ kind }) {
    if (INSIGHT_KINDS.has(kind)) this.refresh();
  }

  async #load() {
    try {
      const data = await this.client.execute(CONSOLIDATION);
      this.#render(data.consolidationHistory.edges.map((edge) => edge.node));
    } catch (error) {
      this.report(error);
    }
  }

  #render(actions) {
    const rows = actions.map((action) => {
      const kind = action.kind.toLowerCase();
      const badge = h("span", { class: `action ${kind}` }, KINDS[action.kind]);
      const undone = action.undoneAt ? h("span", { class: "undone" }, "undone") : "";
      return h(
        "tr",
        { "data-id": action.id, class: action.undoneAt ? "is-undone" : "" },
        h("td", {}, badge, undone),
        h("td", { class: "content" }, action.reason),
        h("td", { class: "when" }, new Date(action.createdAt).toLocaleString()),
      );
    });
    if (!rows.length) {
      rows.push(h("tr", {}, h("td", { class: "empty", colspan: 3 }, "Nothing consolidated yet")));
    }
    this.table.tBodies[0].replaceChildren(...rows);
  }
}
