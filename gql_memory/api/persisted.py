"""Trusted documents (persisted operations) and Apollo's automatic persisted queries (APQ).

A trusted manifest (GQL_MEMORY_TRUSTED_DOCUMENTS) maps the SHA-256 hex digest of each
document's text to the text, as GraphQL Code Generator's client preset writes it. A request
names one with ``documentId: "sha256:<hex>"`` (or the bare hex). With
GQL_MEMORY_TRUSTED_DOCUMENTS_ONLY nothing else runs: a deployment whose known frontend sends
only ids refuses every hostile document before it is parsed.

APQ (``extensions.persistedQuery.sha256Hash``): a hash alone runs the document registered
under it, or answers PERSISTED_QUERY_NOT_FOUND ("PersistedQueryNotFound"), upon which Apollo
clients resend hash and document; the server checks that the hash matches and registers it.
Registrations are kept per namespace (one tenant never runs, or learns of, another's) in a
bounded LRU per process. Trusted-only mode refuses registration.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gql_memory.config import Settings
from gql_memory.errors import (
    ConfigurationError,
    PersistedQueryNotFoundError,
    PersistedQueryRequiredError,
    ValidationError,
)

log = logging.getLogger(__name__)

DOCUMENT_ID = "documentId"  # set by the HTTP view from the request's documentId parameter
PERSISTED_QUERY = "persistedQuery"
SHA256_PREFIX = "sha256:"
# Namespaces whose APQ registrations are kept; the least recently used one is dropped first.
APQ_MAX_NAMESPACES = 10_000
TRUSTED_ONLY = (
    "Only trusted documents are served here (GQL_MEMORY_TRUSTED_DOCUMENTS_ONLY): send the "
    "documentId of a document from the manifest"
)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def load_manifest(path: Path) -> dict[str, str]:
    """The manifest's documents by digest; a manifest that is not valid, or whose digest does
    not match its document, stops startup with a message naming the entry."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        message = f"GQL_MEMORY_TRUSTED_DOCUMENTS: cannot read {path}: {exc}"
        raise ConfigurationError(message) from exc
    if not isinstance(raw, dict):
        raise ConfigurationError(
            f"GQL_MEMORY_TRUSTED_DOCUMENTS: {path} must be a JSON object of digest: document"
        )
    documents = {}
    for key, text in raw.items():
        digest = key.removeprefix(SHA256_PREFIX).lower()
        if not isinstance(text, str) or sha256_hex(text) != digest:
            raise ConfigurationError(
                f"GQL_MEMORY_TRUSTED_DOCUMENTS: entry {key!r} of {path} is not the SHA-256 "
                "hex digest of its document text"
            )
        documents[digest] = text
    return documents


class PersistedDocuments:
    """Resolves the document an operation runs: its own text, a trusted document or an APQ
    registration of the caller's namespace."""

    def __init__(self, trusted: Mapping[str, str], trusted_only: bool, apq_cache_size: int) -> None:
        self.trusted = dict(trusted)
        self.trusted_only = trusted_only
        self.apq_cache_size = apq_cache_size
        self._apq: OrderedDict[str, OrderedDict[str, str]] = OrderedDict()

    @classmethod
    def for_settings(cls, settings: Settings) -> PersistedDocuments:
        path = settings.trusted_documents
        if settings.trusted_documents_only and path is None:
            raise ConfigurationError(
                "GQL_MEMORY_TRUSTED_DOCUMENTS_ONLY needs a manifest: set "
                "GQL_MEMORY_TRUSTED_DOCUMENTS to its path"
            )
        trusted = load_manifest(path) if path is not None else {}
        if path is not None:
            log.info(
                "trusted documents: %d from %s; %s",
                len(trusted),
                path,
                "trusted-only mode is ON: any other document is refused"
                if settings.trusted_documents_only
                else "other documents are served too",
            )
        return cls(trusted, settings.trusted_documents_only, settings.apq_cache_size)

    def resolve(
        self, namespace: str, query: str | None, extensions: Mapping[str, Any]
    ) -> str | None:
        """The text to run, or raise the refusal. ``query`` passes unchanged when the request
        names no persisted document and ad-hoc documents are allowed."""
        document_id = extensions.get(DOCUMENT_ID)
        if document_id is not None:
            return self._trusted_document(str(document_id), query)
        persisted = extensions.get(PERSISTED_QUERY)
        if persisted is not None:
            return self._automatic(namespace, query, persisted)
        if self.trusted_only and (query is None or sha256_hex(query) not in self.trusted):
            raise PersistedQueryRequiredError(TRUSTED_ONLY)
        return query

    def _trusted_document(self, document_id: str, query: str | None) -> str:
        if query is not None:
            raise ValidationError("Send either documentId or query, not both")
        text = self.trusted.get(document_id.removeprefix(SHA256_PREFIX).lower())
        if text is None:
            raise PersistedQueryNotFoundError()
        return text

    def _automatic(self, namespace: str, query: str | None, persisted: object) -> str:
        if not isinstance(persisted, Mapping) or persisted.get("version") != 1:
            raise ValidationError("extensions.persistedQuery must be {version: 1, sha256Hash}")
        digest = persisted.get("sha256Hash")
        if not isinstance(digest, str):
            raise ValidationError("extensions.persistedQuery.sha256Hash must be a string")
        digest = digest.lower()
        if digest in self.trusted:
            if query is not None and sha256_hex(query) != digest:
                raise ValidationError("provided sha does not match query")
            return self.trusted[digest]
        registered = self._apq.get(namespace)
        if query is None:
            if registered is None or digest not in registered:
                raise PersistedQueryNotFoundError()
            registered.move_to_end(digest)
            self._apq.move_to_end(namespace)
            return registered[digest]
        if self.trusted_only:
            raise PersistedQueryRequiredError(
                "Automatic persisted queries cannot be registered here: only trusted documents "
                "are served (GQL_MEMORY_TRUSTED_DOCUMENTS_ONLY)"
            )
        if sha256_hex(query) != digest:
            raise ValidationError("provided sha does not match query")
        self._register(namespace, digest, query)
        return query

    def _register(self, namespace: str, digest: str, query: str) -> None:
        if not self.apq_cache_size:
            return
        registered = self._apq.setdefault(namespace, OrderedDict())
        self._apq.move_to_end(namespace)
        registered[digest] = query
        registered.move_to_end(digest)
        while len(registered) > self.apq_cache_size:
            registered.popitem(last=False)
        while len(self._apq) > APQ_MAX_NAMESPACES:
            self._apq.popitem(last=False)

    def registered_count(self, namespace: str) -> int:
        return len(self._apq.get(namespace, ()))
