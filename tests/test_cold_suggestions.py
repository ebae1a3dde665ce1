""""Usually used with" on the real corpus, a library with no groups and no run log (#25, item 6).

The suggestions come from the library itself (``graph/companions.py``). Each row was read by
eye: the suggestion is one a person doing the request would plausibly use with the skill the
answer selected, and its reason says where it came from. The second table holds suggestions
that were wrong and are gone. Requests with no suggestion are not listed as failures: an empty
"usually used with" is better than a wrong one (the corpus says nothing about, e.g., what an
Instantly cold-email campaign is used with).
"""

from __future__ import annotations

import pytest

from skillgrove.graph import EmbeddedStore, Retriever, index_library
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.groups import load_library
from tests.conftest import CORPUS

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpora is not here")]


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory, encoder: CachedEncoder) -> Retriever:
    store = EmbeddedStore(tmp_path_factory.mktemp("cold") / "graph.sqlite")
    index_library(load_library([CORPUS]), store, encoder)
    return Retriever(store, encoder)


def _suggested(retriever: Retriever, request: str) -> dict[str, str]:
    toolbox = retriever.search(request, k=10)
    assert toolbox.group is None  # the corpus has no groups
    return {s.name: s.reason for s in toolbox.suggestions}


@pytest.mark.parametrize(("request_text", "name", "reason"), [
    # a sibling asked for by what it does: "select an available image generation skill"
    ("turn my meeting notes into a slide deck for the board", "baoyu-image-gen",
     "baoyu-slide-deck: its instructions ask for `baoyu-image-gen`: 'image generation skill'"),
    ("make a pitch deck from these notes", "baoyu-image-gen",
     "its instructions ask for `baoyu-image-gen`: 'image generation skill'"),
    # named outright
    ("make a comic strip about our company history", "baoyu-image-gen",
     "baoyu-comic: its instructions name `baoyu-image-gen`"),
    ("write a literature review on CRISPR off-target effects with citations", "gget",
     "literature-review: its instructions name `gget`"),
    ("write unit tests first and then implement the feature", "systematic-debugging",
     "test-driven-development: `systematic-debugging`'s instructions name it"),
    ("search pubchem for compounds similar to aspirin and predict their properties",
     "scikit-learn", "deepchem: its instructions name `scikit-learn`"),
    # the gh- family of openai's '.curated' folder
    ("set up a github actions CI pipeline that deploys to kubernetes", "gh-address-comments",
     "gh-fix-ci: same package folder 'openai__skills/skills/.curated' (6 skills), both 'gh-'"),
])
def test_a_cold_library_suggests_companions_from_itself(retriever: Retriever, request_text: str,
                                                         name: str, reason: str) -> None:
    suggested = _suggested(retriever, request_text)
    assert name in suggested, suggested
    assert reason in suggested[name]


@pytest.mark.parametrize(("request_text", "wrong"), [
    # openai's '.curated' folder holds the gh- and the notion- skills: not one package
    ("set up a github actions CI pipeline that deploys to kubernetes", "notion-"),
    # skill-creator says "a negative test for a PDF skill": an example, not the pdf skill
    ("fill in this pdf form and merge it with another pdf", "skill-creator"),
])
def test_no_wrong_companion(retriever: Retriever, request_text: str, wrong: str) -> None:
    suggested = _suggested(retriever, request_text)
    assert not any(n.startswith(wrong) for n in suggested), suggested
