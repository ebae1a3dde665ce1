"""The store Protocol: what retrieval and indexing need from a graph backend.

Two implementations pass one conformance suite (``tests/test_store_conformance.py``): the
embedded store (arrays and dicts in memory, SQLite on disk; the default) and the Neo4j store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from skillgrove.graph.embeddings import Vectors
from skillgrove.graph.model import Edge, EdgeKind, NodeKind, NodeRecord, SyncReport


class GraphStore(Protocol):
    def sync(self, nodes: Sequence[NodeRecord], vectors: Mapping[str, Vectors],
             edges: Sequence[Edge], meta: Mapping[str, str] | None = None) -> SyncReport:
        """Make the stored graph equal to ``nodes`` and ``edges``, writing only what changed,
        and set the ``meta`` entries (the index's generation, router, ...) in the same
        transaction.

        ``vectors`` must hold an embedding for each added or updated node. The switch is atomic:
        readers see the old graph with its old metadata or the new graph with the new, never a
        mixture, and a failed or interrupted sync leaves both as they were.
        """
        ...

    def node(self, node_id: str) -> NodeRecord | None: ...

    def nodes(self, kind: NodeKind | None = None) -> list[NodeRecord]: ...

    def edges(self, kind: EdgeKind | None = None) -> list[Edge]: ...

    def neighbors(self, node_id: str, kinds: Sequence[EdgeKind] | None = None,
                  ) -> list[tuple[Edge, NodeRecord]]:
        """Edges touching ``node_id`` (either direction) with the node at the other end."""
        ...

    def vector_search(self, kind: NodeKind, vector: Vectors, k: int) -> list[tuple[str, float]]:
        """Ids and cosine similarities of the ``k`` nearest nodes of ``kind``, best first."""
        ...

    def text_search(self, kind: NodeKind, query: str, k: int) -> list[tuple[str, float]]:
        """Ids and lexical scores of the ``k`` best text matches of ``kind``, best first."""
        ...

    def vector(self, node_id: str) -> Vectors | None: ...

    # Batched reads: what a search needs, in one call each. On the Neo4j store every call is a
    # round trip to the server, so retrieval asks for all the ids it knows it will need at once.

    def nodes_by_id(self, ids: Iterable[str]) -> dict[str, NodeRecord]:
        """The records of ``ids`` that exist (unknown ids are left out), as :meth:`node`."""
        ...

    def vectors(self, ids: Iterable[str]) -> dict[str, Vectors]:
        """The stored embeddings of ``ids`` (ids without one are left out), as :meth:`vector`."""
        ...

    def neighbors_of(self, ids: Iterable[str], kinds: Sequence[EdgeKind] | None = None,
                     ) -> dict[str, list[tuple[Edge, NodeRecord]]]:
        """:meth:`neighbors` of each of ``ids`` (every id a key, in the same order as there;
        an unknown id has none)."""
        ...

    def text_searches(self, query: str, limits: Mapping[NodeKind, int],
                      ) -> dict[NodeKind, list[tuple[str, float]]]:
        """:meth:`text_search` of ``query`` over several kinds at once (kind -> its ``k``)."""
        ...

    def vector_searches(self, vector: Vectors, limits: Mapping[NodeKind, int],
                        ) -> dict[NodeKind, list[tuple[str, float]]]:
        """:meth:`vector_search` of ``vector`` over several kinds at once (kind -> its ``k``)."""
        ...

    def hybrid_searches(self, query: str, vector: Vectors | None,
                        text_limits: Mapping[NodeKind, int],
                        vector_limits: Mapping[NodeKind, int],
                        ) -> tuple[dict[NodeKind, list[tuple[str, float]]],
                                   dict[NodeKind, list[tuple[str, float]]]]:
        """``(text_searches(query, text_limits), vector_searches(vector, vector_limits))`` in
        one call (``vector`` may be None when ``vector_limits`` is empty)."""
        ...

    def get_meta(self, key: str) -> str | None:
        """An entry as of now: a store that keeps the graph in memory reads it again first
        when another process has written the index since (readers check the generation
        before each search)."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """One entry on its own; what describes the graph is written by :meth:`sync`."""
        ...

    def close(self) -> None: ...
