"""Graph: stores, embeddings, indexes and two-tier retrieval.

The names below load on first use, so that importing one small module of this package (the
node model, the documents) does not pull in numpy, SQLite and the stores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillgrove.skills import lazy_attribute

if TYPE_CHECKING:
    from skillgrove.graph.embedded import EmbeddedStore
    from skillgrove.graph.embeddings import (
        CachedEncoder,
        EmbeddingCache,
        Encoder,
        SentenceTransformerEncoder,
    )
    from skillgrove.graph.errors import GraphError, IndexMissingError, ModelError, StoreError
    from skillgrove.graph.indexer import IndexResult, build_graph, index_library
    from skillgrove.graph.model import (
        Edge,
        EdgeKind,
        GroupNode,
        NodeKind,
        NodeRecord,
        SkillNode,
        SyncReport,
    )
    from skillgrove.graph.retrieval import Retriever
    from skillgrove.graph.stages import Settings
    from skillgrove.graph.store import GraphStore
    from skillgrove.graph.toolbox import (
        GroupChoice,
        GroupExplanation,
        RequestContext,
        ScoredSkill,
        SkillExplanation,
        Toolbox,
    )

_WHERE = {
    "EmbeddedStore": "embedded",
    "CachedEncoder": "embeddings", "EmbeddingCache": "embeddings", "Encoder": "embeddings",
    "SentenceTransformerEncoder": "embeddings",
    "GraphError": "errors", "IndexMissingError": "errors", "ModelError": "errors",
    "StoreError": "errors",
    "IndexResult": "indexer", "build_graph": "indexer", "index_library": "indexer",
    "Edge": "model", "EdgeKind": "model", "NodeKind": "model", "NodeRecord": "model",
    "SyncReport": "model", "SkillNode": "model", "GroupNode": "model",
    "Retriever": "retrieval", "Settings": "stages",
    "RequestContext": "toolbox", "Toolbox": "toolbox", "GroupChoice": "toolbox",
    "ScoredSkill": "toolbox", "SkillExplanation": "toolbox", "GroupExplanation": "toolbox",
    "GraphStore": "store",
}

__all__ = [
    "CachedEncoder",
    "Edge",
    "EdgeKind",
    "EmbeddedStore",
    "EmbeddingCache",
    "Encoder",
    "GraphError",
    "GraphStore",
    "GroupChoice",
    "GroupExplanation",
    "GroupNode",
    "IndexMissingError",
    "IndexResult",
    "ModelError",
    "NodeKind",
    "NodeRecord",
    "RequestContext",
    "Retriever",
    "ScoredSkill",
    "SentenceTransformerEncoder",
    "Settings",
    "SkillExplanation",
    "SkillNode",
    "StoreError",
    "SyncReport",
    "Toolbox",
    "build_graph",
    "index_library",
]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _WHERE, globals(), name)
