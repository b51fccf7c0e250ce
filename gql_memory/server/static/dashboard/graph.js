// The graph neighbourhood of one node: the nodes within `depth` hops, each on a ring by its
// distance, joined by the edges of their shortest paths. Click a node to centre on it.

import { coalesced, h, svg } from "./dom.js";
import { NEIGHBORS, NODES } from "./operations.js";

const WIDTH = 560;
const HEIGHT = 380;
const NODE_RADIUS = 16;
const PALETTE = ["#1f6f8b", "#c0504d", "#4f8a3c", "#8064a2", "#d08b1f", "#3f7fbf", "#9c5b3c"];
// memoryEvents kinds that change the graph.
const GRAPH_KINDS = new Set([
  "NODE_ADDED",
  "NODE_DELETED",
  "EDGE_ADDED",
  "EDGE_INVALIDATED",
  "RESYNC",
]);

export class GraphView {
  constructor(client, report) {
    this.client = client;
    this.report = report;
    this.nodes = document.getElementById("graph-node");
    this.depth = document.getElementById("graph-depth");
    this.canvas = document.getElementById("graph-canvas");
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
        ...nodes.map((node) => h("option", { value: node.id }, `${node.label}: ${node.name}`)),
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
      if (data.node) this.#draw(data.node, data.neighbors);
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
    const lines = [...edges.values()]
      .filter((edge) => positions.has(edge.sourceId) && positions.has(edge.targetId))
      .map((edge) => drawEdge(edge, positions.get(edge.sourceId), positions.get(edge.targetId)));
    const nodes = [centre, ...neighbors.map((n) => n.node)].map((node) =>
      drawNode(node, positions.get(node.id), node.id === centre.id, () => this.show(node.id)),
    );
    this.canvas.replaceChildren(defs, ...lines, ...nodes);
    this.canvas.setAttribute("aria-label", `${neighbors.length} nodes around ${centre.name}`);
  }
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
    svg("line", {
      x1: from.x + dx * NODE_RADIUS,
      y1: from.y + dy * NODE_RADIUS,
      x2: to.x - dx * (NODE_RADIUS + 2),
      y2: to.y - dy * (NODE_RADIUS + 2),
      "marker-end": "url(#arrow)",
    }),
    // the relation beside the middle of the line: above a flat one, right of a steep one
    Math.abs(dx) >= Math.abs(dy)
      ? svg("text", { x: (from.x + to.x) / 2, y: (from.y + to.y) / 2 - 5 }, edge.relation)
      : svg(
          "text",
          { x: (from.x + to.x) / 2 + 6, y: (from.y + to.y) / 2 + 4, class: "beside" },
          edge.relation,
        ),
  );
}

function drawNode(node, at, isCentre, onclick) {
  return svg(
    "g",
    {
      class: isCentre ? "node centre" : "node",
      transform: `translate(${at.x} ${at.y})`,
      tabindex: 0,
      role: "button",
      "data-id": node.id,
      onclick,
      onkeydown: (event) => event.key === "Enter" && onclick(),
    },
    svg("title", {}, `${node.label}: ${node.name} (id ${node.id})`),
    svg("circle", { r: NODE_RADIUS, fill: colour(node.label) }),
    svg("text", { class: "label", y: NODE_RADIUS + 14 }, node.name),
    svg("text", { class: "kind", y: 4 }, node.label.slice(0, 3)),
  );
}

function colour(label) {
  let hash = 0;
  for (const char of label) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
  return PALETTE[hash % PALETTE.length];
}
