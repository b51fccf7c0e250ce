// Every GraphQL document the dashboard sends, each selecting only the fields its view shows.
// They are its trusted documents: persisted-documents.json maps the SHA-256 hex of each text
// to the text, and the client sends `documentId: "sha256:<hex>"` instead of the text.
// After changing a document here, rewrite the manifest: `python -m tests.browser.documents`
// (tests/test_ui.py checks that the two match and that each document is valid).

export const STATS = `query DashboardStats {
  stats { workingMemory staleMemory insights episodes nodes edges sessions }
}`;

// The API has no list of sessions: the dashboard finds them in recent dialogue turns and
// archived items (with their times: it opens on the most recently active), and in live events.
export const SESSIONS = `query DashboardSessions {
  rawDialogue(sessionId: null, first: 200) { edges { node { sessionId timestamp } } }
  staleMemory(sessionId: null, first: 200) { edges { node { sessionId archivedAt } } }
}`;

export const SESSION_FILL = `query DashboardSessionFill($sessionId: String!) {
  workingMemory(sessionId: $sessionId) { importance attention }
}`;

export const WORKING_MEMORY = `query DashboardWorkingMemory($sessionId: String!) {
  workingMemory(sessionId: $sessionId) { id content importance attention mentionCount }
}`;

export const WORKING_MEMORY_CHANGED = `subscription DashboardWorkingMemoryChanged(
  $sessionId: String!
) {
  workingMemoryChanged(sessionId: $sessionId) {
    event { kind itemId }
    items { id content importance attention mentionCount }
  }
}`;

export const MEMORY_EVENTS = `subscription DashboardMemoryEvents {
  memoryEvents { kind sessionId }
}`;

export const STALE_MEMORY = `query DashboardStaleMemory($reason: ArchiveReason) {
  staleMemory(sessionId: null, reason: $reason, first: 50) {
    edges { node { id sessionId originalContent reason archivedAt } }
  }
}`;

export const SEARCH = `query DashboardSearch(
  $query: String!
  $sessionId: String!
  $layers: [MemoryLayer!]!
) {
  search(query: $query, sessionId: $sessionId, layers: $layers, topK: 8) {
    layer id content fusion vectorRank textRank rrfScore fusedScore
    graphBoost sessionBoost causalBoost finalScore
  }
}`;

// A node's caption: a turn's speaker and first words, an insight's first words, else its name
// (an automatic node's name is the id of the memory it stands for).
export const NODES = `query DashboardNodes {
  nodes(first: 200) {
    edges {
      node { id label name rawDialogue { speaker content } insight { content } }
    }
  }
}`;

export const NEIGHBORS = `query DashboardNeighbors($nodeId: ID!, $depth: Int!) {
  node(id: $nodeId) { id label name rawDialogue { speaker content } insight { content } }
  neighbors(nodeId: $nodeId, depth: $depth) {
    distance
    node { id label name rawDialogue { speaker content } insight { content } }
    edges { id sourceId targetId relation }
  }
}`;

export const CONSOLIDATION = `query DashboardConsolidation {
  consolidationHistory(first: 50) {
    edges { node { id kind targetId ids reason createdAt undoneAt } }
  }
}`;
