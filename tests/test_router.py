"""The group router: a linear discriminant over the groups' examples (graph/router.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.graph.indexer import index_library
from skillgrove.graph.retrieval import Retriever
from skillgrove.graph.router import ROUTER_DIGEST_KEY, ROUTER_KEY, GroupRouter
from skillgrove.groups.library import load_library
from skillgrove.skills.loader import LoadOptions
from tests.conftest import FIXTURES

EXAMPLES = {
    "group:trip": ["book a flight to Lisbon and a hotel near the beach",
                   "I need plane tickets to Rome and somewhere to stay",
                   "plan my travel to Tokyo: flights and a room for three nights",
                   "find me a flight and hotel for the Berlin conference",
                   "reserve flights and accommodation for our Madrid holiday"],
    "group:report": ["turn the quarterly PDF into a summary for the board",
                     "summarize this annual report and extract the revenue figures",
                     "read the attached report and give me the key metrics",
                     "make a short digest of the audit PDF",
                     "pull the numbers out of the sales report and summarize them"],
    "group:photos": ["resize these holiday photos and put them in an album",
                     "shrink the pictures from the wedding and share them",
                     "make thumbnails of my camera images",
                     "compress the photos so I can email them",
                     "crop and scale the product pictures for the shop"],
}


def fitted(encoder: CachedEncoder) -> GroupRouter:
    labels = [g for g, texts in EXAMPLES.items() for _ in texts]
    texts = [t for ts in EXAMPLES.values() for t in ts]
    return GroupRouter.fit(labels, texts, encoder.encode(texts))


@pytest.mark.parametrize(("request_text", "group"), [
    ("get me flights and a hotel for Paris next week", "group:trip"),
    ("summarize the board report PDF", "group:report"),
    ("scale down these images", "group:photos"),
])
def test_routes_new_wording_to_its_group(encoder: CachedEncoder, request_text: str,
                                         group: str) -> None:
    router = fitted(encoder)
    posterior = router.posterior(request_text, encoder.encode([request_text])[0])
    assert max(posterior, key=posterior.__getitem__) == group, posterior
    assert sum(posterior.values()) == pytest.approx(1.0)
    assert all(0.0 <= p <= 1.0 for p in posterior.values())


def test_fitting_is_deterministic_and_survives_storage(encoder: CachedEncoder) -> None:
    first, second = fitted(encoder), fitted(encoder)
    assert first.to_text() == second.to_text()
    restored = GroupRouter.from_text(first.to_text())
    text = "thumbnails for the shop"
    vector = encoder.encode([text])[0]
    assert restored.posterior(text, vector) == pytest.approx(first.posterior(text, vector))
    assert restored.temperature == first.temperature


def test_temperature_makes_the_posterior_less_than_certain() -> None:
    """Held-out examples set the temperature: with overlapping groups the router must not claim
    certainty it has not earned."""
    rng = np.random.default_rng(3)
    centers = rng.standard_normal((4, 16))
    labels, texts, rows = [], [], []
    for g in range(4):
        for i in range(60):
            labels.append(f"g{g}")
            texts.append(f"request number {i}")  # the words do not give the group away
            rows.append(centers[g] + 1.5 * rng.standard_normal(16))
    vectors = np.asarray(rows, dtype=np.float32)
    router = GroupRouter.fit(labels, texts, vectors)
    assert router.temperature > 1.0
    confidences = [max(router.posterior(t, v).values()) for t, v in zip(texts, vectors,
                                                                          strict=True)]
    assert 0.3 < float(np.median(confidences)) < 0.999


def test_one_group_is_not_a_router() -> None:
    with pytest.raises(ValueError, match="at least two groups"):
        GroupRouter.fit(["g", "g"], ["a b", "b c"], np.eye(2, 4, dtype=np.float32))


def test_index_stores_the_router_and_search_explains_it(encoder: CachedEncoder,
                                                        tmp_path) -> None:  # type: ignore[no-untyped-def]
    library = load_library([FIXTURES / "library"], LoadOptions())
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    index_library(library, store, encoder)
    assert store.get_meta(ROUTER_KEY) and store.get_meta(ROUTER_DIGEST_KEY)
    toolbox = Retriever(store, encoder).search(
        "summarize the quarterly report PDF and email it to the team")
    assert toolbox.group is not None
    assert 0.0 < (toolbox.group.explanation.router or 0) <= 1.0
    assert next(g for g, _ in toolbox.group_candidates) == toolbox.group.id
    store.close()


def test_the_router_can_be_turned_off_for_the_groups_words(encoder: CachedEncoder,
                                                          tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``groups.router`` off (fitted on history where it chooses worse): the group with the
    best score answers, and the answer says no router chose it."""
    from skillgrove.graph.stages import DEFAULT_SETTINGS, Settings

    library = load_library([FIXTURES / "library"], LoadOptions())
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    index_library(library, store, encoder)
    off = DEFAULT_SETTINGS.but(groups={"router": False})
    assert Settings.from_json(off.to_json()) == off
    retriever = Retriever(store, encoder, off)
    assert retriever.router() is None and Retriever(store, encoder).router() is not None
    toolbox = retriever.search("summarize the quarterly report PDF and email it to the team")
    assert toolbox.group is not None and toolbox.group.explanation.router is None
    assert toolbox.group.explanation.vector is not None
    store.close()


def test_a_library_with_one_group_clears_the_router(encoder: CachedEncoder,
                                                    tmp_path) -> None:  # type: ignore[no-untyped-def]
    library = load_library([FIXTURES / "library"], LoadOptions())
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    index_library(library, store, encoder)
    retriever = Retriever(store, encoder)
    assert retriever.router() is not None
    only = next(iter(library.groups))
    smaller = dataclasses.replace(library, groups={only: library.groups[only]})
    index_library(smaller, store, encoder)
    assert store.get_meta(ROUTER_KEY) == ""
    assert retriever.router() is None  # the retriever notices the new index
    store.close()


class _NoEncoder:
    name = "all-MiniLM-L6-v2"
    dimensions = 384

    def encode(self, texts):  # type: ignore[no-untyped-def]
        raise AssertionError("the fast route must not embed the request")


def test_fast_route_answers_from_words_alone_when_allowed(encoder: CachedEncoder,
                                                          tmp_path) -> None:  # type: ignore[no-untyped-def]
    from skillgrove.graph.stages import DEFAULT_SETTINGS

    library = load_library([FIXTURES / "library"], LoadOptions())
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    index_library(library, store, encoder)
    request = "summarize the quarterly report PDF and email the metrics to the team"
    full = Retriever(store, encoder).search(request)
    assert full.group is not None and full.group.explanation.route is None
    fast_config = DEFAULT_SETTINGS.but(
        groups={"threshold": 0.0, "fast_route": 0.0, "support_depth": None, "top_lead": None})
    fast = Retriever(store, _NoEncoder(), fast_config).search(request)  # type: ignore[arg-type]
    assert fast.group is not None and fast.group.id == full.group.id
    assert fast.group.explanation.route == "lexical"
    assert fast.skills and all(s.explanation.vector is None for s in fast.skills)
    # A positive similarity bar needs the embedding: no fast route then.
    with pytest.raises(AssertionError, match="must not embed"):
        Retriever(store, _NoEncoder(),  # type: ignore[arg-type]
                  fast_config.but(groups={"threshold": 0.35})).search(request)
    store.close()


def test_a_reindex_with_the_same_groups_reuses_the_stored_router(
        encoder: CachedEncoder, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Fitting is the slow part of re-indexing many groups; equal inputs give an equal router,
    so it is fitted again only when a group's text, examples or vectors change."""
    import shutil

    from skillgrove.graph.indexer import ROUTER_INPUT_KEY

    root = tmp_path / "library"
    shutil.copytree(FIXTURES / "library", root)
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    fits: list[int] = []
    original = GroupRouter.fit.__func__  # type: ignore[attr-defined]

    def counting(cls, *args, **kwargs):  # type: ignore[no-untyped-def]
        fits.append(1)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(GroupRouter, "fit", classmethod(counting))
    index_library(load_library([root], LoadOptions()), store, encoder)
    first = (store.get_meta(ROUTER_KEY), store.get_meta(ROUTER_INPUT_KEY))
    assert fits == [1] and first[0]
    index_library(load_library([root], LoadOptions()), store, encoder)
    assert fits == [1]
    assert (store.get_meta(ROUTER_KEY), store.get_meta(ROUTER_INPUT_KEY)) == first
    group_file = next((root / "groups").glob("*.yaml"))
    text = group_file.read_text(encoding="utf-8")
    group_file.write_text(text.replace("examples:\n", "examples:\n  - a brand new way to ask\n", 1),
                          encoding="utf-8")
    index_library(load_library([root], LoadOptions()), store, encoder)
    assert fits == [1, 1]
    assert store.get_meta(ROUTER_INPUT_KEY) != first[1]
    store.close()
