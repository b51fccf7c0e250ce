// Hybrid search with its explanation: per hit, a small bar chart of the vector and text
// ranks (as 1/rank, what RRF sums), the RRF and fused scores, the graph, session and causal
// boosts and the final score. Each bar is scaled to the largest value among the hits.

import { bar, h, score } from "./dom.js";
import { SEARCH } from "./operations.js";

// What the fused score is, for the bar's tooltip and the note under the form.
const FUSED =
  "The two legs' scores combined. DBSF (distribution-based score fusion, the default): each " +
  "leg's scores are standardised over its best candidates, (score − min) / stdev, then " +
  "weighted and summed. RRF (reciprocal rank fusion): the sum of weight / (60 + rank).";

const MEASURES = [
  ["vector rank", (hit) => hit.vectorRank && 1 / hit.vectorRank, (hit) => rank(hit.vectorRank)],
  ["text rank", (hit) => hit.textRank && 1 / hit.textRank, (hit) => rank(hit.textRank)],
  ["RRF", (hit) => hit.rrfScore],
  ["fused", (hit) => hit.fusedScore, (hit) => `${score(hit.fusedScore)} ${hit.fusion}`, FUSED],
  ["graph boost", (hit) => hit.graphBoost],
  ["session boost", (hit) => hit.sessionBoost],
  ["causal boost", (hit) => hit.causalBoost],
  ["final", (hit) => hit.finalScore],
];

function rank(value) {
  return value ? `#${value}` : "–";
}

export class SearchView {
  constructor(client, report) {
    this.client = client;
    this.report = report;
    this.session = "default";
    this.results = document.getElementById("search-results");
    this.form = document.getElementById("search-form");
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.search();
    });
  }

  /** Searches boost hits by the focused session's working memory. */
  sessionFocused(session) {
    this.session = session;
    document.getElementById("search-session").textContent = session;
  }

  async search() {
    const query = this.form.elements.query.value.trim();
    const layers = [...this.form.querySelectorAll("input[name=layer]:checked")].map(
      (box) => box.value,
    );
    if (!query || !layers.length) return;
    try {
      const data = await this.client.execute(SEARCH, { query, sessionId: this.session, layers });
      this.#render(data.search);
    } catch (error) {
      this.report(error);
    }
  }

  #render(hits) {
    const largest = MEASURES.map(([, value]) => Math.max(0, ...hits.map((hit) => value(hit) ?? 0)));
    this.results.replaceChildren(
      ...hits.map((hit, position) =>
        h(
          "li",
          { class: "hit", "data-id": `${hit.layer}:${hit.id}` },
          h(
            "p",
            { class: "hit-title" },
            h("span", { class: "position" }, `${position + 1}`),
            h("span", { class: `layer ${hit.layer.toLowerCase()}` }, hit.layer),
            h("span", { class: "content" }, hit.content),
          ),
          h(
            "dl",
            { class: "explanation" },
            MEASURES.map(([name, value, shown, about], i) => {
              const v = value(hit) ?? 0;
              return [
                h("dt", { title: about ?? null }, name),
                h(
                  "dd",
                  { class: name === "final" ? "final" : null },
                  bar(largest[i] > 0 ? v / largest[i] : 0),
                  h("span", { class: "num" }, shown ? shown(hit) : score(value(hit))),
                ),
              ];
            }),
          ),
        ),
      ),
    );
    if (!hits.length) this.results.replaceChildren(h("li", { class: "empty" }, "No hits"));
  }
}
