"""Fixtures of the Neo4j tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from skillgrove.graph.neo4j_store import Neo4jStore
from tests.neo4j import support


@pytest.fixture
def store() -> Iterator[Neo4jStore]:
    """A store on an emptied database, closed after the test."""
    opened = support.fresh_store()
    try:
        yield opened
    finally:
        opened.close()
