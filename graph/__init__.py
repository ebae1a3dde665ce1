"""Graph: stores, embeddings, indexes and two-tier retrieval."""

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import (
    CachedEncoder,
    EmbeddingCache,
    Encoder,
    SentenceTransformerEncoder,
)
from skillgrove.graph.errors import GraphError, IndexMissingError, ModelError, StoreError
from skillgrove.graph.indexer import IndexResult, build_graph, index_library
from skillgrove.graph.model import Edge, EdgeKind, NodeKind, NodeRecord, SyncReport
from skillgrove.graph.retrieval import RequestContext, RetrievalConfig, Retriever, Toolbox
from skillgrove.graph.store import GraphStore

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
