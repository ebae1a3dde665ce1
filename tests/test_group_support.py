"""Whether a group answers (``GroupSettings.top_lead``): a group that shares only a prerequisite
with the skill a request names is not the task asked for; a toolbox composed around that skill
answers. Every request is routed to a group here (threshold 0), as calibration does where
history says so, so that the rule, not the threshold, decides."""

from __future__ import annotations

import pytest

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.graph.retrieval import Retriever
from skillgrove.graph.stages import DEFAULT_SETTINGS
from tests.helpers import group_yaml, indexed_store

SKILLS = {
    "shop-login": "Log in to the online shop with the user's account.",
    "add-to-cart": "Add an item to the shopping cart of the online shop.",
    "checkout-cart": "Pay for the items in the shopping cart and place the order.",
    "cancel-order": "Cancel an order that was already placed and refund the money.",
    "play-song": "Play a song on the speakers.",
}

GROUPS = {
    "cart": ("shop-login", "add-to-cart", ["add this jacket to my cart",
                                          "put the blue shoes in my shopping basket"]),
    "checkout": ("shop-login", "checkout-cart", ["check out my cart",
                                                 "pay for what's in my basket"]),
    "music": ("play-song", "play-song", ["play my favourite song", "put on some music"]),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, encoder: CachedEncoder) -> EmbeddedStore:
    return indexed_store(tmp_path_factory.mktemp("support"), SKILLS,
                         {gid: group_yaml(gid, *group) for gid, group in GROUPS.items()},
                         encoder)


ROUTED = DEFAULT_SETTINGS.but(groups={"threshold": 0.0, "one_skill_margin": None,
                                      "step_lead": None})

# (request, the rule's share or None for off, the group that answers or None, the first
# skill selected)
CASES = [
    # the skill asked for is in no group: the shop groups share only its prerequisite
    ("cancel my last order and refund the money", 0.9, None, "cancel-order"),
    ("cancel my last order and refund the money", None, "checkout", "shop-login"),
    # the skill asked for is a group's step: the group stands
    ("add these running shoes to my cart", 0.9, "cart", "shop-login"),
    ("play my favourite song", 0.9, "music", "play-song"),
]


@pytest.mark.parametrize(("request_text", "lead", "group", "first"), CASES)
def test_a_group_answers_only_for_the_task_it_does(store: EmbeddedStore, encoder: CachedEncoder,
                                                  request_text: str, lead: float | None,
                                                  group: str | None, first: str) -> None:
    settings = ROUTED.but(groups={"top_lead": lead})
    toolbox = Retriever(store, encoder, settings).search(request_text)
    assert (toolbox.group.name if toolbox.group else None) == group, toolbox.fallback_reason
    names = {s.id: s.name for s in toolbox.skills}
    if toolbox.group is not None:
        names.update(zip(toolbox.group.members, toolbox.group.member_names, strict=False))
    assert names[toolbox.selected[0]] == first
    if group is None:
        assert "no group holds 'cancel-order'" in (toolbox.fallback_reason or "")
