"""Shared test setup.

Tests marked ``neo4j`` need the real Neo4j server that ``.ci/test`` starts; they are skipped with
a clear reason when it is not running (``.ci/run`` then fails the build, so CI cannot pass without
them).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpora" / "skills"
NEO4J_URI = os.environ.get("SKILLGROVE_NEO4J_URI", "bolt://127.0.0.1:7687")


def _neo4j_listening() -> bool:
    parsed = urlparse(NEO4J_URI)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 7687), 1):
            return True
    except OSError:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.get_closest_marker("neo4j") for item in items):
        return
    if _neo4j_listening():
        return
    skip = pytest.mark.skip(reason=f"no Neo4j server at {NEO4J_URI}; run .ci/test")
    for item in items:
        if item.get_closest_marker("neo4j"):
            item.add_marker(skip)


_REQUIRED = {"neo4j": ("SKILLGROVE_REQUIRE_NEO4J", "Neo4j tests must run", ""),
             "browser": ("SKILLGROVE_REQUIRE_BROWSER", "browser tests must run",
                         " (is /usr/bin/chromium installed? .ci/setup installs it)")}
"""Marker -> (the variable that makes its tests required, the message, advice)."""
_outcomes: dict[str, dict[str, str]] = {marker: {} for marker in _REQUIRED}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for marker, outcomes in _outcomes.items():
        if marker in report.keywords and (report.when == "call" or report.skipped):
            outcomes[report.nodeid] = report.outcome


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With SKILLGROVE_REQUIRE_NEO4J=1 (the test command sets it), skipped Neo4j tests fail;
    with SKILLGROVE_REQUIRE_BROWSER=1, skipped browser (studio) tests do."""
    for marker, (variable, message, advice) in _REQUIRED.items():
        if os.environ.get(variable) != "1" or exitstatus not in (0, 5):
            continue
        outcomes = _outcomes[marker]
        passed = sum(1 for outcome in outcomes.values() if outcome == "passed")
        skipped = sum(1 for outcome in outcomes.values() if outcome == "skipped")
        if skipped or passed == 0:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"FAILED: {message}: {passed} passed, {skipped} skipped"
                                    f"{advice}", red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def fixture_library() -> Path:
    return FIXTURES / "library"


@pytest.fixture(scope="session")
def encoder():  # type: ignore[no-untyped-def]
    """The real all-MiniLM-L6-v2, loaded once per session.

    Its embedding cache is the product's own (``$SKILLGROVE_CACHE``, else ~/.cache/skillgrove):
    vectors are keyed by model and text, so a later run re-embeds only text it has not seen.
    """
    from skillgrove.graph.embeddings import CachedEncoder, EmbeddingCache, default_encoder
    from skillgrove.runtime.commands import cache_path

    cache = EmbeddingCache(cache_path())
    return CachedEncoder(default_encoder(None, cache_path().parent), cache)
