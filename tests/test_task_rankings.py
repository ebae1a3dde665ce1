"""A task stated over several sentences is ranked as one text, and the skill it gets may be in
no single sentence's ranking nor the whole request's: the toolbox still holds it.

Found on Sealtools-in with ``search -k 1``: "operate a robot and perform maintenance on an
aircraft. Check the robot's obstacle distance and make it pick an item. Then, ..." picked
``performRobotTask`` for its first task, a skill only that task's joined text ranks first, and
the search stopped with a KeyError."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.retrieval import Retriever
from skillgrove.runtime import bench

SEALTOOLS = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "sealtools-in"
REQUEST = ("Please help me to operate a robot and perform maintenance on an aircraft. Check the "
           "robot's obstacle distance and make it pick an item. Then, perform a maintenance task "
           "on aircraft ABC123 with task ID 123456. The task is completed and the engine part XYZ "
           "has been replaced.")


@pytest.mark.parametrize("k", [1, 3, 10])
def test_a_task_s_skill_found_only_by_its_joined_text_is_answered(
        k: int, tmp_path: Path, encoder: object) -> None:
    if not SEALTOOLS.is_dir():
        pytest.skip(f"{SEALTOOLS} is missing")
    full = bench.read_dataset(SEALTOOLS)
    words = ("robot", "maintenance", "aircraft", "obstacle", "pick")
    skills = tuple(s for s in full.skills if any(w in str(s["name"]) for w in words))
    dataset = replace(full, skills=skills, history=(), queries=full.queries[:1])
    store, _, _ = bench._build(dataset, tmp_path / "flat", "flat", None, encoder,  # type: ignore[arg-type]
                               lambda folder: EmbeddedStore(folder / "graph.sqlite"))
    try:
        toolbox = Retriever(store, encoder).search(REQUEST, k=k)  # type: ignore[arg-type]
    finally:
        store.close()
    ranked = {s.id for s in toolbox.skills}
    assert len(toolbox.selected) >= 2
    assert set(toolbox.selected) <= ranked
    assert "performMaintenanceTask" in toolbox.selected


TOOLLINKOS = SEALTOOLS.parent / "toollinkos"


def test_a_part_whose_skill_is_a_same_named_copy_gets_the_skill_that_answers_for_it(
        tmp_path: Path, encoder: object) -> None:
    # Two skills of one name: the selection names the one that answers for it (the other is
    # shadowed), which the parts' rankings may not hold. It stopped the search with a KeyError
    # (found by bench/formats.py's "repeated names" on ToolLinkOS).
    if not TOOLLINKOS.is_dir():
        pytest.skip(f"{TOOLLINKOS} is missing")
    full = bench.read_dataset(TOOLLINKOS)
    skills = [dict(s) for s in full.skills[:120]]
    for n in range(4, len(skills), 5):
        skills[n]["name"] = skills[n - 1]["name"]
    dataset = replace(full, skills=tuple(skills), history=(), queries=full.queries[:1])
    store, library, _ = bench._build(dataset, tmp_path / "flat", "flat", None, encoder,  # type: ignore[arg-type]
                                     lambda folder: EmbeddedStore(folder / "graph.sqlite"))
    try:
        toolbox = Retriever(store, encoder).search(  # type: ignore[arg-type]
            "I'm on a long flight and would love to watch a movie. Can you help me pick "
            "something from the in-flight entertainment?")
    finally:
        store.close()
    # What is selected is what the names run: no shadowed copy.
    assert toolbox.selected
    assert set(toolbox.selected) <= {s.id for s in library.skills.values()}


def test_a_selected_skill_is_listed_though_only_its_same_named_copy_ranked(
        tmp_path: Path, encoder: object) -> None:
    # The second root's copy describes the request better; the first root's skill answers
    # for the name. It was selected but not listed, and the reason named it by its id.
    from skillgrove.graph.indexer import index_library
    from skillgrove.groups.library import load_library
    from skillgrove.skills.loader import LoadOptions
    from tests.helpers import write_skill

    for root, description in (("first", "Convert units."), ("second", "Convert a temperature "
                                                            "from celsius to fahrenheit.")):
        write_skill(tmp_path / root / "skills", "convert-units",
                    f"---\nname: convert-units\ndescription: {description}\n---\n")
    write_skill(tmp_path / "first" / "skills", "send-email",
                "---\nname: send-email\ndescription: Send an email message.\n---\n")
    library = load_library([tmp_path / "first", tmp_path / "second"], LoadOptions())
    store = EmbeddedStore(None)
    index_library(library, store, encoder)  # type: ignore[arg-type]
    toolbox = Retriever(store, encoder).search("convert 30 celsius to fahrenheit", k=1)  # type: ignore[arg-type]
    answering = library.skills["convert-units"].id
    assert toolbox.selected == (answering,)
    assert toolbox.skills[0].id == answering
    assert toolbox.skills[0].description == "Convert units."
    assert toolbox.reason is not None and answering not in toolbox.reason
