"""Graph: stores, embeddings, indexes and two-tier retrieval."""

from graph.embedded import EmbeddedStore
from graph.embeddings import CachedEncoder, EmbeddingCache, Encoder, SentenceTransformerEncoder
from graph.errors import GraphError, IndexMissingError, ModelError, StoreError
from graph.indexer import IndexResult, build_graph, index_library
from graph.model import Edge, EdgeKind, NodeKind, NodeRecord, SyncReport
from graph.retrieval import RequestContext, RetrievalConfig, Retriever, Toolbox
from graph.store import GraphStore

__all__ = [
    "CachedEncoder",
    "Edge",
    "EdgeKind",
    "EmbeddedStore",
    "EmbeddingCache",
    "Encoder",
    "GraphError",
    "GraphStore",
    "IndexMissingError",
    "IndexResult",
    "ModelError",
    "NodeKind",
    "NodeRecord",
    "RequestContext",
    "RetrievalConfig",
    "Retriever",
    "SentenceTransformerEncoder",
    "StoreError",
    "SyncReport",
    "Toolbox",
    "build_graph",
    "index_library",
]
