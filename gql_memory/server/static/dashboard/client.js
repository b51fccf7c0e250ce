// GraphQL over HTTP for the dashboard: queries as POST (Accept:
// application/graphql-response+json), subscriptions as graphql-sse streams (Accept:
// text/event-stream) read with fetch, so that the API key travels in the Authorization
// header (an EventSource could only put it in the URL). Every operation is sent by its
// trusted-document id; a server without the dashboard's manifest answers
// PERSISTED_QUERY_NOT_FOUND, and the client sends the documents' text from then on.

const RESPONSE_TYPE = "application/graphql-response+json";
const NOT_FOUND = "PERSISTED_QUERY_NOT_FOUND";
const RETRY_MS = [500, 1000, 2000, 5000];
// Refusals a reconnect cannot cure: a missing, invalid or revoked key, a missing scope.
const FATAL = new Set(["UNAUTHENTICATED", "FORBIDDEN", "PERSISTED_QUERY_REQUIRED"]);

export class RequestError extends Error {
  constructor(errors) {
    const codes = errors.map((e) => e.extensions?.code ?? "ERROR");
    super(errors.map((e, i) => `${codes[i]}: ${e.message}`).join("; "));
    this.codes = codes;
  }

  get fatal() {
    return this.codes.some((code) => FATAL.has(code));
  }
}

export class Client {
  /** endpoint: the /graphql URL; manifest: {sha256 hex: document text}. */
  constructor(endpoint, manifest) {
    this.endpoint = endpoint;
    this.ids = new Map(Object.entries(manifest).map(([hex, text]) => [text, `sha256:${hex}`]));
    this.byId = true;
    this.key = "";
  }

  /** The data of a query or mutation; throws RequestError when the result has errors. */
  async execute(document, variables = {}) {
    const sentById = this.#sendsById(document);
    const response = await fetch(this.endpoint, {
      method: "POST",
      headers: this.#headers(RESPONSE_TYPE),
      body: this.#body(document, variables),
    });
    const result = await readJSON(response);
    if (result.errors?.length) {
      const error = new RequestError(result.errors);
      if (sentById && error.codes.includes(NOT_FOUND)) {
        this.byId = false;
        return this.execute(document, variables);
      }
      throw error;
    }
    return result.data;
  }

  /** A live subscription; see Subscription. */
  subscribe(document, variables, handlers) {
    return new Subscription(this, document, variables, handlers);
  }

  #sendsById(document) {
    return this.byId && this.ids.has(document);
  }

  #body(document, variables) {
    const operation = this.#sendsById(document)
      ? { documentId: this.ids.get(document) }
      : { query: document };
    return JSON.stringify({ ...operation, variables });
  }

  #headers(accept) {
    const headers = { Accept: accept, "Content-Type": "application/json" };
    if (this.key) headers.Authorization = `Bearer ${this.key}`;
    return headers;
  }

  /** One graphql-sse request (distinct connections mode); used by Subscription. */
  async openStream(document, variables, signal) {
    const sentById = this.#sendsById(document);
    const response = await fetch(this.endpoint, {
      method: "POST",
      headers: this.#headers("text/event-stream"),
      body: this.#body(document, variables),
      signal,
    });
    if (response.headers.get("content-type")?.startsWith("text/event-stream")) return response;
    const result = await readJSON(response);
    const error = new RequestError(result.errors ?? [{ message: `HTTP ${response.status}` }]);
    if (sentById && error.codes.includes(NOT_FOUND)) {
      this.byId = false;
      return this.openStream(document, variables, signal);
    }
    throw error;
  }
}

/**
 * Runs a subscription until closed, reconnecting after a dropped stream. Handlers:
 * open(reconnected) when a stream starts (after a reconnect, refetch what may have changed
 * meanwhile), next(data) per event, state("live" | "connecting" | "failed", error) on every
 * change of state.
 */
class Subscription {
  constructor(client, document, variables, handlers) {
    this.abort = new AbortController();
    this.#run(client, document, variables, handlers);
  }

  close() {
    this.abort.abort();
  }

  async #run(client, document, variables, { open, next, state }) {
    const { signal } = this.abort;
    let opened = false;
    for (let attempt = 0; !signal.aborted; attempt++) {
      state("connecting");
      try {
        const response = await client.openStream(document, variables, signal);
        if (signal.aborted) return;
        attempt = 0;
        state("live");
        open?.(opened);
        opened = true;
        for await (const { event, data } of serverSentEvents(response.body)) {
          if (event === "complete") break;
          if (event !== "next") continue;
          const result = JSON.parse(data);
          if (result.errors?.length) throw new RequestError(result.errors);
          next(result.data);
        }
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof RequestError && error.fatal) {
          state("failed", error);
          return;
        }
      }
      if (signal.aborted) return;
      state("connecting");
      await pause(RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)], signal);
    }
  }
}

/** The events of a text/event-stream body: {event, data}; comments (heartbeats) skipped. */
async function* serverSentEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replaceAll("\r\n", "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let event = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (!line || line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "event") event = text;
          else if (field === "data") data.push(text);
        }
        if (data.length || event !== "message") yield { event, data: data.join("\n") };
      }
    }
  } finally {
    reader.cancel().catch(() => {}); // closes the connection when the caller stops early
  }
}

async function readJSON(response) {
  try {
    return await response.json();
  } catch {
    return { errors: [{ message: `HTTP ${response.status} ${response.statusText}` }] };
  }
}

/** Resolves after ms, or at once when the signal aborts (a backoff, not a synchronisation). */
function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
