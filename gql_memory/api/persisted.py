"""Trusted documents (persisted operations) and Apollo's automatic persisted queries (APQ).

A trusted manifest (GQL_MEMORY_TRUSTED_DOCUMENTS) maps the SHA-256 hex digest of each
document's text to the text, as GraphQL Code Generator's client preset writes it. A request
names one with ``documentId: "sha256:<hex>"`` (or the bare hex). With
GQL_MEMORY_TRUSTED_DOCUMENTS_ONLY nothing else runs: a deployment whose known frontend sends
only ids refuses every hostile document before it is parsed.

APQ (``extensions.persistedQuery.sha256Hash``): a hash alone runs the document registered
under it, or answers PERSISTED_QUERY_NOT_FOUND ("PersistedQueryNotFound"), upon which Apollo
clients resend hash and document; the server checks that the hash matches before parsing,
and registers the document only once its operation was admitted: parsed, validated, within
the caller's scope, cost and rate limits (``register``, called by the
PersistedQueryRegistration extension). A refused request registers nothing. Registrations
are kept per namespace (one tenant never runs, or learns of, another's) in an LRU per
process, bounded in documents and in bytes per namespace, and in bytes over all namespaces.
Trusted-only mode refuses registration.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

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
# What a registration costs beyond its two strings (document, digest): its slots in the
# namespace's OrderedDict (hash table entry, index, linked-list node), rounded up.
APQ_ENTRY_OVERHEAD_BYTES = 128
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


class ApqObserver(Protocol):
    """What the APQ cache reports (server/metrics.Metrics implements it)."""

    def apq_cache_changed(self, documents: int, size_bytes: int) -> None: ...

    def apq_evicted(self, reason: str, documents: int) -> None: ...


def registration_bytes(digest: str, query: str) -> int:
    """The memory one registration holds: both strings as Python stores them (1, 2 or 4
    bytes a character, by the widest one) and the cache entry."""
    return sys.getsizeof(query) + sys.getsizeof(digest) + APQ_ENTRY_OVERHEAD_BYTES


class PersistedDocuments:
    """Resolves the document an operation runs: its own text, a trusted document or an APQ
    registration of the caller's namespace."""

    def __init__(
        self,
        trusted: Mapping[str, str],
        trusted_only: bool,
        apq_cache_size: int,
        apq_max_bytes_per_namespace: int = 4 * 1024 * 1024,
        apq_max_bytes: int = 64 * 1024 * 1024,
        observer: ApqObserver | None = None,
    ) -> None:
        self.trusted = dict(trusted)
        self.trusted_only = trusted_only
        self.apq_cache_size = apq_cache_size
        self.apq_max_bytes_per_namespace = apq_max_bytes_per_namespace
        self.apq_max_bytes = apq_max_bytes
        self.observer = observer
        # namespace -> digest -> (document, its registration_bytes), both least recent first
        self._apq: OrderedDict[str, OrderedDict[str, tuple[str, int]]] = OrderedDict()
        self._namespace_bytes: dict[str, int] = {}
        self._bytes = 0
        self._documents = 0

    @classmethod
    def for_settings(
        cls,
        settings: Settings,
        observer: ApqObserver | None = None,
        builtin: Mapping[str, str] | None = None,
    ) -> PersistedDocuments:
        """The configured manifest's documents, and ``builtin``: the documents of the UIs the
        server itself serves (the dashboard's), trusted whatever the settings, so that its
        page never meets PERSISTED_QUERY_NOT_FOUND."""
        path = settings.trusted_documents
        if settings.trusted_documents_only and path is None:
            raise ConfigurationError(
                "GQL_MEMORY_TRUSTED_DOCUMENTS_ONLY needs a manifest: set "
                "GQL_MEMORY_TRUSTED_DOCUMENTS to its path"
            )
        trusted = dict(builtin or {})
        if path is not None:
            trusted |= load_manifest(path)
        if path is not None:
            log.info(
                "trusted documents: %d from %s; %s",
                len(trusted),
                path,
                "trusted-only mode is ON: any other document is refused"
                if settings.trusted_documents_only
                else "other documents are served too",
            )
        return cls(
            trusted,
            settings.trusted_documents_only,
            settings.apq_cache_size,
            settings.apq_max_bytes_per_namespace,
            settings.apq_max_bytes,
            observer,
        )

    def resolve(
        self, namespace: str, query: str | None, extensions: Mapping[str, Any]
    ) -> str | None:
        """The text to run, or raise the refusal. ``query`` passes unchanged when the request
        names no persisted document and ad-hoc documents are allowed. Registers nothing: an
        APQ document is registered by ``register`` once its operation was admitted."""
        document_id = extensions.get(DOCUMENT_ID)
        if document_id is not None:
            return self._trusted_document(str(document_id), query)
        persisted = extensions.get(PERSISTED_QUERY)
        if persisted is not None:
            return self._automatic(namespace, query, persisted)
        if self.trusted_only and (query is None or sha256_hex(query) not in self.trusted):
            raise PersistedQueryRequiredError(TRUSTED_ONLY)
        return query

    def register(self, namespace: str, query: str, extensions: Mapping[str, Any]) -> None:
        """Register the APQ document of an admitted operation (parsed, validated, within
        scope, cost and rate limits), so its hash alone runs it from now on. Anything but a
        registration request (hash and matching document, not a trusted one) is left alone."""
        persisted = extensions.get(PERSISTED_QUERY)
        if not isinstance(persisted, Mapping) or persisted.get("version") != 1:
            return
        digest = persisted.get("sha256Hash")
        if not isinstance(digest, str) or self.trusted_only or not self.apq_cache_size:
            return
        digest = digest.lower()
        registered = self._apq.get(namespace)
        if digest in self.trusted or (registered is not None and digest in registered):
            return  # resolve() already marked a registered one as recently used
        if sha256_hex(query) != digest:
            return  # resolve() refused it; never register a document under another's hash
        size = registration_bytes(digest, query)
        if size > min(self.apq_max_bytes_per_namespace, self.apq_max_bytes):
            return  # runs, but would evict everything else: never kept
        if registered is None:
            registered = self._apq[namespace] = OrderedDict()
        self._apq.move_to_end(namespace)
        registered[digest] = (query, size)
        self._namespace_bytes[namespace] = self._namespace_bytes.get(namespace, 0) + size
        self._bytes += size
        self._documents += 1
        self._evict(namespace)
        if self.observer is not None:
            self.observer.apq_cache_changed(self._documents, self._bytes)

    def _evict(self, namespace: str) -> None:
        """Drop least recently used registrations until every bound holds again: first the
        namespace's own (documents, bytes), then the least recently used namespaces'."""
        registered = self._apq[namespace]
        dropped = 0
        while (
            len(registered) > self.apq_cache_size
            or self._namespace_bytes[namespace] > self.apq_max_bytes_per_namespace
        ):
            self._drop_oldest(namespace)
            dropped += 1
        self._evicted("namespace", dropped)
        dropped = 0
        while self._bytes > self.apq_max_bytes or len(self._apq) > APQ_MAX_NAMESPACES:
            self._drop_oldest(next(iter(self._apq)))
            dropped += 1
        self._evicted("total", dropped)

    def _drop_oldest(self, namespace: str) -> None:
        """Drop the namespace's least recently used registration (the namespace with its
        last one)."""
        registered = self._apq[namespace]
        _, (_, size) = registered.popitem(last=False)
        self._namespace_bytes[namespace] -= size
        self._bytes -= size
        self._documents -= 1
        if not registered:
            del self._apq[namespace]
            del self._namespace_bytes[namespace]

    def _evicted(self, reason: str, documents: int) -> None:
        if documents and self.observer is not None:
            self.observer.apq_evicted(reason, documents)

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
        if registered is not None and digest in registered:
            registered.move_to_end(digest)
            self._apq.move_to_end(namespace)
            if query is None:
                return registered[digest][0]
        elif query is None:
            raise PersistedQueryNotFoundError()
        if self.trusted_only:
            raise PersistedQueryRequiredError(
                "Automatic persisted queries cannot be registered here: only trusted documents "
                "are served (GQL_MEMORY_TRUSTED_DOCUMENTS_ONLY)"
            )
        if sha256_hex(query) != digest:
            raise ValidationError("provided sha does not match query")
        return query

    def registered_count(self, namespace: str) -> int:
        return len(self._apq.get(namespace, ()))

    def registered_bytes(self, namespace: str | None = None) -> int:
        """The memory the registrations of ``namespace`` (of all namespaces: None) hold."""
        if namespace is None:
            return self._bytes
        return self._namespace_bytes.get(namespace, 0)
