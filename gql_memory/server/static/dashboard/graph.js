// The graph neighbourhood of one node: the nodes within `depth` hops, each on a ring by its
// distance, joined by the edges of their shortest paths. Click a node to centre on it. Each
// node is coloured by its kind (the legend under the picture) and captioned with what it
// stands for; an edge's relation is written beside it where it fits among the nodes and
// captions, else shown on hover.

import { coalesced, h, svg } from "./dom.js";
import { NEIGHBORS, NODES } from "./operations.js";

const WIDTH = 560;
const HEIGHT = 380;
const NODE_RADIUS = 16;
const PALETTE = ["#1f6f8b", "#c0504d", "#4f8a3c", "#8064a2", "#d08b1f", "#3f7fbf", "#9c5b3c"];
// memoryEvents kinds that change the graph: its own, and the writes that graph themselves
// (a stored turn or insight gets a node and edges, an erased one loses them).
const GRAPH_KINDS = new Set([
  "NODE_ADDED",
  "NODE_DELETED",
  "EDGE_ADDED",
  "EDGE_INVALIDATED",
  "DIALOGUE_STORED",
  "INSIGHT_ADDED",
  "INSIGHT_DELETED",
  "SESSION_FORGOTTEN",
  "RESYNC",
]);
const CAPTION_WORDS = 5;
const CAPTION_CHARS = 30;
// Text boxes for placing labels, in SVG units at these font sizes (style.css).
const CHAR_WIDTH = { edge: 6, caption: 6.6 };
const LINE_HEIGHT = 13;

export class GraphView {
  constructor(client, report) {
    this.client = client;
    this.report = report;
    this.nodes = document.getElementById("graph-node");
    this.depth = document.getElementById("graph-depth");
    this.canvas = document.getElementById("graph-canvas");
    this.legend = document.getElementById("graph-legend");
    this.centre = null;
    this.nodes.addEventListener("change", () => this.show(this.nodes.value));
    this.depth.addEventListener("change", () => this.centre && this.show(this.centre));
    this.refresh = coalesced(() => this.#refresh());
  }

  eventArrived({ kind }) {
    if (GRAPH_KINDS.has(kind)) this.refresh();
  }

  async #refresh() {
    try {
      const data = await this.client.execute(NODES);
      const nodes = data.nodes.edges.map((edge) => edge.node);
      this.nodes.replaceChildren(
        h("option", { value: "" }, nodes.length ? "choose a node…" : "no nodes yet"),
        ...nodes.map((node) => h("option", { value: node.id }, `${node.label}: ${caption(node)}`)),
      );
      const centre = this.centre ?? nodes[0]?.id;
      if (centre) await this.show(centre);
    } catch (error) {
      this.report(error);
    }
  }

  async show(nodeId) {
    if (!nodeId) return;
    this.centre = nodeId;
    this.nodes.value = nodeId;
    try {
      const data = await this.client.execute(NEIGHBORS, {
        nodeId,
        depth: Number(this.depth.value),
      });
      // an answer for a node no longer chosen (another was picked meanwhile) is dropped
      if (data.node && nodeId === this.centre) this.#draw(data.node, data.neighbors);
    } catch (error) {
      this.report(error);
    }
  }

  #draw(centre, neighbors) {
    const positions = layout(centre, neighbors);
    const edges = new Map();
    for (const neighbor of neighbors) {
      for (const edge of neighbor.edges) edges.set(edge.id, edge);
    }
    const defs = svg(
      "defs",
      {},
      svg(
        "marker",
        {
          id: "arrow",
          viewBox: "0 0 10 10",
          refX: 10,
          refY: 5,
          markerWidth: 7,
          markerHeight: 7,
          orient: "auto-start-reverse",
        },
        svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow" }),
      ),
    );
    relax(positions, [...edges.values()], centre.id);
    const shown = [centre, ...neighbors.map((n) => n.node)];
    const kinds = [...new Set(shown.map((node) => node.label))].sort();
    const colourOf = colours(kinds);
    const drawn = [...edges.values()].filter(
      (edge) => positions.has(edge.sourceId) && positions.has(edge.targetId),
    );
    // what labels must not cover: every node, then each caption and edge label once placed
    const taken = shown.map((node) => circleBox(positions.get(node.id)));
    const nodes = shown.map((node) => {
      const at = positions.get(node.id);
      const text = caption(node);
      // within the picture: a caption near its edge is moved in, off its node's centre
      const half = (text.length * CHAR_WIDTH.caption) / 2;
      const x = Math.min(WIDTH - 2 - half, Math.max(2 + half, at.x));
      const below = textBox(x, at.y + NODE_RADIUS + 14, text, CHAR_WIDTH.caption);
      const above = textBox(x, at.y - NODE_RADIUS - 6, text, CHAR_WIDTH.caption);
      const [y, box] =
        fits(below, taken) || !fits(above, taken)
          ? [NODE_RADIUS + 14, below]
          : [-NODE_RADIUS - 6, above];
      taken.push(box);
      const captionAt = { x: x - at.x, y };
      const fill = colourOf.get(node.label);
      return drawNode(node, at, text, captionAt, fill, node.id === centre.id, () =>
        this.show(node.id),
      );
    });
    const lines = drawn.map((edge) =>
      drawEdge(edge, positions.get(edge.sourceId), positions.get(edge.targetId)),
    );
    const labels = drawn.map((edge) =>
      edgeLabel(edge, positions.get(edge.sourceId), positions.get(edge.targetId), taken),
    );
    this.canvas.replaceChildren(defs, ...lines, ...nodes, ...labels);
    this.canvas.setAttribute("aria-label", `${neighbors.length} nodes around ${caption(centre)}`);
    this.legend.replaceChildren(
      ...kinds.map((kind) => {
        const swatch = h("span", { class: "swatch" });
        swatch.style.background = colourOf.get(kind); // CSSOM: the CSP allows no style attribute
        const count = shown.filter((node) => node.label === kind).length;
        return h("li", {}, swatch, `${kind} (${count})`);
      }),
    );
  }
}

/** What a node stands for, in a few words: "user: I am planning a trip…", "Caroline". */
export function caption(node) {
  if (node.rawDialogue) {
    return `${node.rawDialogue.speaker}: ${firstWords(node.rawDialogue.content)}`;
  }
  if (node.insight) return firstWords(node.insight.content);
  return firstWords(node.name);
}

function firstWords(text) {
  const words = text.split(/\s+/).filter(Boolean);
  let shown = words.slice(0, CAPTION_WORDS).join(" ");
  if (shown.length > CAPTION_CHARS) shown = shown.slice(0, CAPTION_CHARS).trimEnd();
  return shown.length < words.join(" ").length ? `${shown}…` : shown;
}

function circleBox(at) {
  return {
    left: at.x - NODE_RADIUS,
    right: at.x + NODE_RADIUS,
    top: at.y - NODE_RADIUS,
    bottom: at.y + NODE_RADIUS,
  };
}

/** The box of a middle-anchored text whose baseline is at (x, y). */
function textBox(x, y, text, charWidth) {
  const half = (text.length * charWidth) / 2 + 2;
  return { left: x - half, right: x + half, top: y - LINE_HEIGHT + 2, bottom: y + 3 };
}

function fits(box, taken) {
  return !taken.some(
    (other) =>
      box.left < other.right &&
      other.left < box.right &&
      box.top < other.bottom &&
      other.top < box.bottom,
  );
}

/**
 * Node id -> {x, y}: the centre in the middle, distance d on ring d; the first ring evenly
 * spaced, each further node beside the node it was reached from.
 */
function layout(centre, neighbors) {
  const angles = new Map([[centre.id, 0]]);
  const rings = new Map();
  for (const neighbor of neighbors) {
    rings.set(neighbor.distance, [...(rings.get(neighbor.distance) ?? []), neighbor]);
  }
  for (const [distance, ring] of [...rings].sort(([a], [b]) => a - b)) {
    if (distance === 1) {
      // half a step off the vertical: the page is wider than high
      const step = (2 * Math.PI) / ring.length;
      ring.forEach((n, i) => angles.set(n.node.id, step * (i + 0.5) - Math.PI / 2));
      continue;
    }
    const siblings = new Map(); // parent id -> children
    for (const n of ring) {
      const last = n.edges.at(-1);
      const parent = last.sourceId === n.node.id ? last.targetId : last.sourceId;
      siblings.set(parent, [...(siblings.get(parent) ?? []), n]);
    }
    for (const [parent, children] of siblings) {
      const gap = 0.9 / distance / Math.max(1, children.length - 1); // radians between siblings
      children.forEach((n, i) => {
        const offset = (i - (children.length - 1) / 2) * gap;
        angles.set(n.node.id, (angles.get(parent) ?? 0) + offset);
      });
    }
  }
  const farthest = Math.max(1, ...rings.keys());
  // an ellipse (the page is wider than high), with room outside for the outer ring's labels
  const [across, down] = [WIDTH / 2 - 50, HEIGHT / 2 - NODE_RADIUS - 20];
  const positions = new Map([[centre.id, { x: WIDTH / 2, y: HEIGHT / 2 }]]);
  for (const n of neighbors) {
    const share = (n.distance + 0.5) / (farthest + 0.5); // the first ring has the most nodes
    const angle = angles.get(n.node.id);
    positions.set(n.node.id, {
      x: WIDTH / 2 + Math.cos(angle) * across * share,
      y: HEIGHT / 2 + Math.sin(angle) * down * share,
    });
  }
  return positions;
}

/**
 * Spreads the ring layout out (Fruchterman-Reingold: nodes repel, edges pull, the moves
 * shrink each round): the centre stays, every node stays inside the picture.
 */
function relax(positions, edges, centreId, rounds = 200) {
  const ids = [...positions.keys()];
  const ideal = Math.sqrt((WIDTH * HEIGHT) / Math.max(2, ids.length)) * 0.75;
  const margin = { x: 50, y: NODE_RADIUS + 20 };
  for (let round = 0; round < rounds; round++) {
    const step = 30 * (1 - round / rounds);
    const moves = new Map(ids.map((id) => [id, { x: 0, y: 0 }]));
    const push = (a, b, strength) => {
      const [p, q] = [positions.get(a), positions.get(b)];
      const [dx, dy] = [p.x - q.x, p.y - q.y];
      const distance = Math.hypot(dx, dy) || 0.01;
      const force = strength(distance) / distance;
      moves.get(a).x += dx * force;
      moves.get(a).y += dy * force;
      moves.get(b).x -= dx * force;
      moves.get(b).y -= dy * force;
    };
    ids.forEach((a, i) => ids.slice(i + 1).forEach((b) => push(a, b, (d) => (ideal * ideal) / d)));
    for (const edge of edges) {
      if (positions.has(edge.sourceId) && positions.has(edge.targetId)) {
        push(edge.sourceId, edge.targetId, (d) => -(d * d) / ideal);
      }
    }
    for (const id of ids) {
      if (id === centreId) continue;
      const [move, at] = [moves.get(id), positions.get(id)];
      const length = Math.hypot(move.x, move.y) || 1;
      at.x += (move.x / length) * Math.min(length, step);
      at.y += (move.y / length) * Math.min(length, step);
      at.x = Math.min(WIDTH - margin.x, Math.max(margin.x, at.x));
      at.y = Math.min(HEIGHT - margin.y, Math.max(margin.y, at.y));
    }
  }
}

function drawEdge(edge, from, to) {
  const length = Math.hypot(to.x - from.x, to.y - from.y) || 1;
  const [dx, dy] = [(to.x - from.x) / length, (to.y - from.y) / length];
  return svg(
    "g",
    { class: "edge" },
    svg("title", {}, edge.relation),
    svg("line", {
      x1: from.x + dx * NODE_RADIUS,
      y1: from.y + dy * NODE_RADIUS,
      x2: to.x - dx * (NODE_RADIUS + 2),
      y2: to.y - dy * (NODE_RADIUS + 2),
      "marker-end": "url(#arrow)",
    }),
  );
}

/**
 * The relation written on the first spot along its line (the middle, then further out)
 * where it covers no node, caption or other label; where none is free, only the line's
 * tooltip names it.
 */
function edgeLabel(edge, from, to, taken) {
  for (const t of [0.5, 0.4, 0.6, 0.3, 0.7]) {
    const [x, y] = [from.x + (to.x - from.x) * t, from.y + (to.y - from.y) * t + 4];
    const box = textBox(x, y, edge.relation, CHAR_WIDTH.edge);
    if (box.left < 0 || box.right > WIDTH || box.top < 0 || box.bottom > HEIGHT) continue;
    if (fits(box, taken)) {
      taken.push(box);
      return svg("text", { class: "relation", x, y, "data-edge": edge.id }, edge.relation);
    }
  }
  return null;
}

function drawNode(node, at, text, captionAt, fill, isCentre, onclick) {
  return svg(
    "g",
    {
      class: isCentre ? "node centre" : "node",
      transform: `translate(${at.x} ${at.y})`,
      tabindex: 0,
      role: "button",
      "data-id": node.id,
      "data-label": node.label,
      onclick,
      onkeydown: (event) => event.key === "Enter" && onclick(),
    },
    svg("title", {}, `${node.label}: ${text} (node ${node.id})`),
    svg("circle", { r: NODE_RADIUS, fill }),
    svg("text", { class: "label", x: captionAt.x, y: captionAt.y }, text),
    svg("text", { class: "kind", y: 4 }, node.label.slice(0, 1)),
  );
}

/** Kind -> colour: each kind its own hue from its name, the next free one on a clash. */
function colours(kinds) {
  const given = new Map();
  for (const kind of kinds) {
    let hash = 0;
    for (const char of kind) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
    const used = new Set(given.values());
    let index = hash % PALETTE.length;
    for (let tries = 0; used.has(PALETTE[index]) && tries < PALETTE.length; tries++) {
      index = (index + 1) % PALETTE.length;
    }
    given.set(kind, PALETTE[index]);
  }
  return given;
}
