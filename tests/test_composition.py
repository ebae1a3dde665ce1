"""Composed toolboxes: declared prerequisites (``depends_on``) join a single-skill answer in
order, with their edges and reasons; the companion that acts on what a prerequisite reads is
ranked right after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.graph.indexer import index_library
from skillgrove.graph.model import EdgeKind
from skillgrove.graph.retrieval import Retriever
from skillgrove.graph.stages import DEFAULT_SETTINGS
from skillgrove.groups.library import load_library
from skillgrove.skills.loader import LoadOptions
from tests.helpers import write_skill

SKILLS = {
    "get-wifi-status": ("Tell whether Wi-Fi is switched on or off.", []),
    "set-wifi-status": ("Switch Wi-Fi on or off.", ["get-wifi-status"]),
    "airline-login": ("Log in to the airline account of the user.", ["get-wifi-status"]),
    "book-flight": ("Book a flight ticket with the airline for given dates and cities.",
                    ["airline-login", "get-wifi-status"]),
    "bake-bread": ("Give a recipe for baking sourdough bread at home.", []),
}


@pytest.fixture
def retriever(tmp_path: Path, encoder: CachedEncoder) -> Retriever:
    for name, (description, needs) in SKILLS.items():
        depends = f"depends_on: [{', '.join(needs)}]\n" if needs else ""
        write_skill(tmp_path / "skills", name,
                    f"---\nname: {name}\ndescription: {description}\n{depends}---\n")
    library = load_library([tmp_path], LoadOptions())
    assert not library.errors
    store = EmbeddedStore(None)
    index_library(library, store, encoder)
    return Retriever(store, encoder)


def test_declared_dependencies_become_edges(retriever: Retriever) -> None:
    ids = {n.name: n.id for n in retriever.store.nodes()}
    declared = {(e.src, e.dst) for e in retriever.store.edges(EdgeKind.FLOWS_TO)
                if e.props.get("declared")}
    assert declared == {(ids["get-wifi-status"], ids["set-wifi-status"]),
                        (ids["get-wifi-status"], ids["airline-login"]),
                        (ids["airline-login"], ids["book-flight"]),
                        (ids["get-wifi-status"], ids["book-flight"])}


def test_the_closure_joins_the_answer_in_order(retriever: Retriever) -> None:
    toolbox = retriever.search("book me a flight to Lisbon next Friday")
    names = {s.id: s.name for s in toolbox.skills}
    assert toolbox.shape == "composed"
    assert [names[s] for s in toolbox.selected] == ["get-wifi-status", "airline-login",
                                                    "book-flight"]
    assert {(names[a], names[b]) for a, b in toolbox.edges} == {
        ("airline-login", "book-flight"), ("get-wifi-status", "book-flight"),
        ("get-wifi-status", "airline-login")}
    ranked = [s.name for s in toolbox.skills]
    # Prerequisites in the order book-flight names them, each companion after its skill.
    assert ranked[:4] == ["book-flight", "airline-login", "get-wifi-status", "set-wifi-status"]
    explained = {s.name: s.explanation for s in toolbox.skills}
    assert explained["get-wifi-status"].prerequisite_of in ("book-flight", "airline-login")
    assert explained["set-wifi-status"].companion_of == "get-wifi-status"
    assert "set-wifi-status" not in [names[s] for s in toolbox.selected]


def test_a_skill_without_prerequisites_stays_one_skill(retriever: Retriever) -> None:
    toolbox = retriever.search("how do I bake sourdough bread")
    assert toolbox.shape == "skill" and not toolbox.edges


def test_the_closure_can_be_turned_off(retriever: Retriever) -> None:
    plain = Retriever(retriever.store, retriever.encoder, DEFAULT_SETTINGS.but(plan={"closure": None}))
    toolbox = plain.search("book me a flight to Lisbon next Friday")
    assert toolbox.shape in ("skill", "skills") and not toolbox.edges


def test_two_skills_joined_by_a_contract_make_a_composed_toolbox(
        tmp_path: Path, encoder: CachedEncoder) -> None:
    """No group and no declared dependency: the output of one selected skill is a required
    input of the other, so the toolbox carries that edge."""
    write_skill(tmp_path / "skills", "fetch-page", """---
name: fetch-page
description: Download a web page from a URL and return its HTML.
inputs: {properties: {url: {type: string}}, required: [url]}
outputs: {properties: {html: {type: string}}}
---
""")
    write_skill(tmp_path / "skills", "clean-html", """---
name: clean-html
description: Strip scripts, styles and tags from HTML and return readable text.
inputs: {properties: {html: {type: string}}, required: [html]}
outputs: {properties: {text: {type: string}}}
---
""")
    write_skill(tmp_path / "skills", "bake-bread", "---\nname: bake-bread\n"
                "description: Give a recipe for baking sourdough bread at home.\n---\n")
    library = load_library([tmp_path], LoadOptions())
    store = EmbeddedStore(None)
    index_library(library, store, encoder)
    toolbox = Retriever(store, encoder).search(
        "Download the page at https://example.com/post. Then strip the tags from its html.")
    names = {s.id: s.name for s in toolbox.skills}
    assert [names[s] for s in toolbox.selected] == ["fetch-page", "clean-html"]
    assert [(names[a], names[b]) for a, b in toolbox.edges] == [("fetch-page", "clean-html")]
    assert toolbox.shape == "composed"


def test_the_nearest_and_first_named_prerequisites_come_first(tmp_path: Path,
                                                              encoder: CachedEncoder) -> None:
    # An author lists what a skill needs most first; a looping pair (a getter and a setter
    # naming each other) still gives a DAG; a small budget keeps the nearest.
    skills = {
        "open-shop": ("Open the shop's web site.", []),
        "shop-login": ("Log in to the online shop account.",
                       ["validate-email", "get-language", "get-brightness"]),
        "add-to-cart": ("Add an item to the online shop cart.", ["shop-login"]),
        "validate-email": ("Check that a string is a valid e-mail address.", []),
        "get-language": ("Read the system language.", ["set-language"]),
        "set-language": ("Change the system language.", ["get-language"]),
        "get-brightness": ("Read the screen brightness.", []),
    }
    for name, (description, needs) in skills.items():
        depends = f"depends_on: [{', '.join(needs)}]\n" if needs else ""
        write_skill(tmp_path / "skills", name,
                    f"---\nname: {name}\ndescription: {description}\n{depends}---\n")
    library = load_library([tmp_path], LoadOptions())
    store = EmbeddedStore(None)
    index_library(library, store, encoder)
    toolbox = Retriever(store, encoder).search("put this jacket in my shop cart")
    names = {s.id: s.name for s in toolbox.skills}
    ranked = [s.name for s in toolbox.skills]
    assert [r for r in ranked if r != "set-language"][:5] == [
        "add-to-cart", "shop-login", "validate-email", "get-language", "get-brightness"]
    order = [names[s] for s in toolbox.selected]
    for a, b in toolbox.edges:  # a DAG, each prerequisite before what needs it
        assert order.index(names[a]) < order.index(names[b])
    assert order[-2:] == ["shop-login", "add-to-cart"]
    small = Retriever(store, encoder, DEFAULT_SETTINGS.but(plan={"closure": 2}))
    kept = [s.name for s in small.search("put this jacket in my shop cart").skills[:3]]
    assert kept == ["add-to-cart", "shop-login", "validate-email"]
