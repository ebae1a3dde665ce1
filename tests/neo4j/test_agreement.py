"""On the real corpus, `skillgrove search --store neo4j` finds what the embedded store finds.

Runs ``bench/neo4j_agreement.py``'s measurement (index with the CLI into both stores, then
search) on a subset of its requests and asserts issue #4's bar: the same top-5 skills for at
least 90 % of them. The bench script prints the figure for the whole set.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import CORPUS, NEO4J_URI
from tests.neo4j.support import clear_database

pytestmark = [pytest.mark.neo4j, pytest.mark.slow,
              pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpora is not here")]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "neo4j_agreement.py"


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("neo4j_agreement", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_neo4j_and_embedded_agree_on_the_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_bench()
    requests = [r for i, r in enumerate(bench.REQUESTS) if r.isascii() and i % 3 == 0]
    requests += [r for r in bench.REQUESTS if not r.isascii()][:3]
    assert len(requests) >= 10
    monkeypatch.setenv("SKILLGROVE_NEO4J_URI", NEO4J_URI)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    clear_database()
    agreement = bench.measure(requests, CORPUS)
    assert agreement.share >= 0.9, bench.report(agreement)
    assert all(len(c.neo4j) == 5 for c in agreement.comparisons)
