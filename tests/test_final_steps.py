"""The router's candidates weighed by the request's evidence for each group's final steps.

A router fitted on a few requests per group learns their shared words as well as their task:
here every request of the shopping group names Amazon, so "Amazon's share price" leans towards
it. The final step of each group (the skill no other step waits for) says what the group is for,
and ``GroupSettings.final_steps`` lets that evidence decide among the router's candidates."""

from __future__ import annotations

import pytest

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.graph.model import NodeKind
from skillgrove.graph.retrieval import Retriever
from skillgrove.graph.stages import DEFAULT_SETTINGS, FinalSteps
from skillgrove.graph.stages.groups import _final_members
from tests.helpers import group_yaml, indexed_store

SKILLS = {
    "amazon-login": "Sign in to the user's Amazon account with email and password.",
    "amazon-add-to-cart": "Put a product into the Amazon shopping cart.",
    "amazon-track-order": "Show where an Amazon parcel is and when it arrives.",
    "get-stock-ticker": "Look up the ticker symbol of a listed company.",
    "get-stock-price": "Give the latest market price of one share of a company's stock.",
}

GROUPS = {
    "amazon-cart": ("amazon-login", "amazon-add-to-cart", [
        "What's the price of this blender on Amazon right now?",
        "Check Amazon's price for these headphones and add them to my cart",
        "Amazon has a good price on this kettle, put it in my cart",
        "Add the cheapest phone charger on Amazon to my cart"]),
    "amazon-parcel": ("amazon-login", "amazon-track-order", [
        "Where is my Amazon parcel right now?", "When does my Amazon order arrive?"]),
    "share-price": ("get-stock-ticker", "get-stock-price", [
        "Give me the stock quote for Nvidia", "What is Tesla trading at on the market?"]),
}

REQUEST = "What's Amazon's share price right now?"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, encoder: CachedEncoder) -> EmbeddedStore:
    return indexed_store(tmp_path_factory.mktemp("final-steps"), SKILLS,
                         {gid: group_yaml(gid, *group, name=f"{group[0]} then {group[1]}")
                          for gid, group in GROUPS.items()},
                         encoder)


def test_the_final_steps_are_those_no_step_needs(store: EmbeddedStore) -> None:
    finals = {n.data["path"].rsplit("/", 1)[-1]: _final_members(n)
              for n in store.nodes(NodeKind.GROUP)}
    names = {n.id: n.name for n in store.nodes(NodeKind.SKILL)}
    assert {g: [names[m] for m in ids] for g, ids in finals.items()} == {
        "amazon-cart.yaml": ["amazon-add-to-cart"],
        "amazon-parcel.yaml": ["amazon-track-order"],
        "share-price.yaml": ["get-stock-price"]}


def test_the_final_step_evidence_picks_the_group_the_request_is_for(
        store: EmbeddedStore, encoder: CachedEncoder) -> None:
    config = DEFAULT_SETTINGS.but(
        groups={"one_skill_margin": None, "step_lead": None, "threshold": 0.0},
        plan={"extend_groups": False})
    alone = Retriever(store, encoder, config).search(REQUEST)
    weighed = Retriever(store, encoder, config.but(groups={"final_steps": FinalSteps(32.0)})).search(REQUEST)
    assert alone.group is not None and weighed.group is not None
    # The router alone leans on the shared word; the fixture exists to show that.
    assert alone.group.name.startswith("amazon-login"), alone.group_candidates
    assert weighed.group.name == "get-stock-ticker then get-stock-price"
    explanation = weighed.group.explanation
    assert explanation.router_first == alone.group.name
    assert (explanation.final_step_evidence or 0) > 0
    # The router's own ranking is still what the toolbox lists as its candidates.
    assert weighed.group_candidates == alone.group_candidates


def test_without_a_weight_nothing_changes(store: EmbeddedStore, encoder: CachedEncoder) -> None:
    plain = Retriever(store, encoder).search(REQUEST)
    assert plain.group is None or plain.group.explanation.final_step_evidence is None
