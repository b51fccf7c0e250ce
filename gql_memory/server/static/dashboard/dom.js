// Element builders: the dashboard writes data into the page as text, never as markup.

const SVG_NS = "http://www.w3.org/2000/svg";

/** An HTML element: h("td", {class: "num"}, "0.50", child, ...); null/false children skipped. */
export function h(tag, attributes = {}, ...children) {
  return build(document.createElement(tag), attributes, children);
}

/** An SVG element, like h(). */
export function svg(tag, attributes = {}, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attributes, children);
}

function build(element, attributes, children) {
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

/** A horizontal bar: `fraction` (0..1) of the track filled. */
export function bar(fraction, kind = "") {
  const fill = h("span", { class: "fill" });
  fill.style.width = `${Math.round(Math.max(0, Math.min(1, fraction)) * 100)}%`;
  return h("span", { class: `bar ${kind}`.trim() }, fill);
}

/** A score for people: three decimals, or a dash for a missing value. */
export function score(value) {
  return value === null || value === undefined ? "–" : value.toFixed(3);
}

/** Runs `task` now, or once more after the run in progress: bursts of events cost two runs. */
export function coalesced(task) {
  let running = null;
  let again = false;
  return function run() {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await task();
      } while (again);
    })().finally(() => {
      running = null;
    });
    return running;
  };
}
