"""Shared helpers for tests that use the real Neo4j server (``SKILLGROVE_NEO4J_URI``)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from neo4j import Driver, GraphDatabase

from skillgrove.graph.cypher import Statement
from skillgrove.graph.neo4j_store import Neo4jConfig, Neo4jStore
from tests.conftest import NEO4J_URI


def driver(uri: str = NEO4J_URI, **config: float) -> Driver:
    return GraphDatabase.driver(uri, auth=None, **config)


def clear_database(uri: str = NEO4J_URI) -> None:
    """Deletes every node and relationship; the schema (constraints, indexes) stays."""
    with driver(uri) as drv:
        drv.execute_query("MATCH (n) DETACH DELETE n")


def fresh_store(uri: str = NEO4J_URI) -> Neo4jStore:
    """A store on an emptied database."""
    clear_database(uri)
    return Neo4jStore.from_config(Neo4jConfig(uri=uri))


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def counted_reads(store: Neo4jStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements ``store`` sends from now on, one entry per round trip of a read."""
    reads: list[str] = []
    read = store._read

    def counted(statement: Statement) -> list[dict[str, Any]]:
        reads.append(statement[0])
        return read(statement)

    monkeypatch.setattr(store, "_read", counted)
    return reads
